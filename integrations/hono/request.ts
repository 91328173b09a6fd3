import type { ServerResponse } from "node:http";
import type { Context, Next } from "hono";
import type { LeaseLostError } from "../../src/errors/index.js";
import { Exchange, type LeaseView } from "../http/exchange.js";
import { watchNodeResponse } from "../http/node-response.js";
import { leaseLostRejection } from "../http/problem.js";
import { problemResponse } from "./exception.js";
import type { HonoOnRejected } from "./types.js";

/** The Node response behind a request served by `@hono/node-server`, if any. */
export function nodeResponse(env: unknown): ServerResponse | undefined {
  if (typeof env !== "object" || env === null || !("outgoing" in env)) return undefined;
  const outgoing = env.outgoing;
  return typeof outgoing === "object" && outgoing !== null && "writableFinished" in outgoing
    ? (outgoing as ServerResponse)
    : undefined;
}

function ignoreLoss(): void {}

/** Cuts a response whose body was already being written when the lease was lost. */
export function cutResponse(this: Exchange): void {
  this.response?.destroy();
}

/**
 * One request through a leasehold middleware or guarded handler: the exchange and the adapter's own
 * state in one object, so that its callbacks are shared functions reading it (`this`), not closures
 * made per request. Watches the client from its creation.
 */
export class HonoExchange extends Exchange {
  /** The lease was lost before the handler settled: the middleware has answered (or will) with a 503. */
  answered = false;
  view: LeaseView | undefined;
  /** Settle the middleware's (or guarded handler's) promise, once there is one. */
  resolve!: (value: Response | PromiseLike<Response> | undefined) => void;
  reject!: (error: unknown) => void;

  constructor(
    name: string,
    graceMs: number,
    readonly c: Context,
    readonly next: Next,
    readonly outgoing: ServerResponse | undefined,
    readonly route: Route,
  ) {
    super(name, graceMs);
    if (outgoing !== undefined) watchNodeResponse(outgoing, this);
    else {
      // Off Node (Bun, Deno, Workers) the request's signal says the client left.
      const signal: AbortSignal | undefined = c.req.raw.signal;
      // Already aborted (the client left during an earlier middleware): no event will come.
      if (signal?.aborted) this.clientGone();
      else signal?.addEventListener("abort", () => this.clientGone(), { once: true });
    }
  }
}

/** What a route's middleware reads per request: its admission's settings. */
export interface Route {
  readonly onRejected: HonoOnRejected | undefined;
  readonly exposeFence: boolean;
}

export function admitFailed(this: HonoExchange, error: unknown): void {
  this.reject(error);
}

/** The lease was lost while the handler ran: answer 503 now (the permit still covers the handler until it settles). */
export function lostFirst(this: HonoExchange, error: LeaseLostError): void {
  this.answered = true;
  this.onLost = ignoreLoss;
  // A turn later, as the race's `await` made it: a handler finishing in this same turn is replaced
  // whole (clearing first, so Hono does not merge the handler's headers into our answer).
  queueMicrotask(() => {
    const { c } = this;
    c.res = undefined;
    c.res = problemResponse(leaseLostRejection(error, this.id, this.limit));
    if (this.outgoing === undefined) this.responded();
    this.resolve(undefined);
  });
}

export function handlerFailed(exchange: HonoExchange, error: unknown): void {
  exchange.workEnded();
  if (exchange.answered) return;
  if (exchange.outgoing === undefined) exchange.responded();
  exchange.reject(error);
}
