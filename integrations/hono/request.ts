import type { ServerResponse } from "node:http";
import type { Context, Next } from "hono";
import type { LeaseLostError } from "../../src/errors/index.js";
import { Exchange, type LeaseView } from "../http/exchange.js";
import { watchNodeResponse } from "../http/node-response.js";
import { abortRejection, leaseLostRejection } from "../http/problem.js";
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

/**
 * One request through a leasehold middleware or guarded handler: the exchange and the adapter's own
 * state in one object, so that its callbacks are shared functions reading it (`this`), not closures
 * made per request. Watches the client from its creation.
 *
 * The handler's work is counted in parts (`parts`): the handler itself (the middleware's `next()`,
 * or the wrapped handler), a wrapped handler behind other middleware that reports its own end, and
 * a streamed body, whose producer (a `stream()` callback) works on after the handler returned. The
 * work has ended when every part has.
 */
export class HonoExchange extends Exchange {
  /** The lease was lost before the handler settled, and the middleware has answered with a 503. */
  answered = false;
  /** That loss, until it is answered. */
  lost: LeaseLostError | undefined;
  view: LeaseView | undefined;
  /** Work parts still running: see the class. */
  parts = 0;
  /** A handler wrapped by this route's guard (`wrap`) reports its own end: `next()` settling is not it. */
  reported = false;
  /** Where the middleware stands in the route's chain (`c.req.routeIndex`), and `c.error` when it was called. */
  routeIndex = -1;
  errorBefore: Error | undefined;
  /** The exchange of a leasehold middleware that admitted this request earlier (they may be stacked), on Hono's side. */
  enclosing: HonoExchange | undefined;
  /** The body the permit waits for, once the handler has returned it (see body.ts). */
  held: Held | undefined;
  /**
   * What becomes of a stream the handler makes once the guard is done with its response (a
   * `timeout()` between them answered first, or its lost lease was answered): Hono never sends it,
   * and its producer would wait on its first write forever. Set by the middleware then.
   */
  late: ((exchange: HonoExchange, made: ReadableStream<Uint8Array>) => void) | undefined;
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

  /**
   * The response is complete. On Node that is the Node response's last byte: a held body not read to
   * its end by then was not what went out (a middleware before the guard answered first, and Hono
   * dropped the handler's response): read it here, within the grace, so its producer's end is seen
   * and nothing is held for a body nobody will read.
   */
  override responded(): void {
    super.responded();
    const held = this.held;
    if (held === undefined || !held.unread) return;
    held.drain();
    this.workUnseen(this.c.error === this.errorBefore ? undefined : this.c.error);
  }

  /** A part of the handler's work began (see the class). */
  partStarted(): void {
    this.parts++;
  }

  /** A part of the handler's work ended; the last one ends the work. */
  partEnded(): void {
    if (--this.parts <= 0) this.workEnded();
  }

  /**
   * Makes leasehold's own abort reasons answerable the Hono way: an error with `getResponse()` is an
   * answer to Hono's error handler, which returns that response and logs nothing. A handler that
   * passes its signal to its work and lets the rejection propagate is then answered as documented
   * (503 `lease-lost` or `shutting-down`; nobody to answer after a departure), not with a 500.
   */
  override signalAborted(reason: Error): void {
    if (answers.has(reason) || "getResponse" in reason || abortRejection(reason, this.id, this.limit) === undefined) return;
    answers.set(reason, this);
    Object.defineProperty(reason, "getResponse", { value: getResponse, configurable: true, writable: true });
  }
}

/** A held body (body.ts), as the exchange drives it. */
export interface Held {
  /** Neither read to its end, nor being drained, nor stopped. */
  readonly unread: boolean;
  drain(): void;
  stop(error: Error): void;
}

/** What a route's middleware reads per request: its admission's settings. */
export interface Route {
  readonly onRejected: HonoOnRejected | undefined;
  readonly exposeFence: boolean;
}

/** leasehold's own abort reasons made answerable (see `signalAborted`), and the request each belongs to. */
const answers = new WeakMap<Error, HonoExchange>();

/** The `getResponse()` of an abort reason: its documented answer, made when asked for. */
function getResponse(this: Error): Response {
  return ownAnswer(answers.get(this) as HonoExchange, this) as Response;
}

/**
 * The documented answer to one of leasehold's own abort reasons (or an `AbortError` whose `cause` is
 * one), if `error` is: 503 `shutting-down` or `lease-lost`, and for a client that left an empty 499
 * nobody reads. `undefined` for any other error, which stays Hono's.
 */
export function ownAnswer(exchange: HonoExchange, error: unknown): Response | undefined {
  const rejection = abortRejection(error, exchange.id, exchange.limit);
  if (rejection === undefined) return undefined;
  return rejection === null ? new Response(null, { status: 499 }) : problemResponse(rejection);
}

/**
 * True when the request was answered by a middleware before the guard while the handler still ran
 * (a `timeout()` placed before it): Hono has sent that answer, and drops what the handler made.
 * Nothing reaches the client before the middleware chain returns otherwise. On Node the Node
 * response has started; off Node the answer's body is being read already.
 */
export function answeredAbove(exchange: HonoExchange): boolean {
  const { outgoing, c } = exchange;
  if (outgoing !== undefined) return outgoing.headersSent;
  if (!c.finalized) return false;
  const { res } = c;
  return res.bodyUsed || res.body?.locked === true;
}

export function admitFailed(this: HonoExchange, error: unknown): void {
  this.reject(error);
}

/**
 * The lease was lost while the handler ran. The answer is a 503 once the handler settles (it
 * stopped on its signal, and may have rethrown the loss) or a turn of the event loop later,
 * whichever comes first: a handler that ignores its signal does not keep the client waiting, and one
 * that heeds it is not answered twice. The permit is already gone: nothing is held any more.
 */
export function lostFirst(this: HonoExchange, error: LeaseLostError): void {
  this.onLost = ignoreLoss;
  this.lost = error;
  setTimeout(answerLossNow, 0, this);
}

function answerLossNow(exchange: HonoExchange): void {
  if (exchange.answered) return;
  answerLoss(exchange);
  exchange.resolve(undefined);
}

/** Sets the 503 for a loss before the response started: replaced whole (clearing first, so Hono does not merge the handler's headers into it). */
export function answerLoss(exchange: HonoExchange): void {
  exchange.answered = true;
  const { c } = exchange;
  c.res = undefined;
  c.res = problemResponse(leaseLostRejection(exchange.lost as LeaseLostError, exchange.id, exchange.limit));
  if (exchange.outgoing === undefined) exchange.responded();
}

/** A loss once the handler's response exists: a Node response is cut, a held body is ended, its producer stopped. */
export function lostDuringBody(this: HonoExchange, error: LeaseLostError): void {
  this.response?.destroy();
  this.held?.stop(error);
}

export function handlerFailed(exchange: HonoExchange, error: unknown): void {
  exchange.partEnded();
  if (exchange.answered) return;
  if (exchange.lost !== undefined) {
    answerLoss(exchange);
    exchange.resolve(undefined);
    return;
  }
  if (exchange.outgoing === undefined) exchange.responded();
  exchange.reject(error);
}

const EXCHANGE = Symbol("leasehold:exchange");
const STREAMED = Symbol("leasehold:streamed");

/** A context as leasehold marks it: the innermost middleware's exchange, and the stream a body was made from. */
interface Marked {
  [EXCHANGE]?: HonoExchange;
  [STREAMED]?: ReadableStream<Uint8Array> | false;
}

/** Records `exchange` as the innermost leasehold middleware of its request, for a wrapped handler behind it. */
export function enter(exchange: HonoExchange): void {
  const marked = exchange.c as Marked;
  exchange.enclosing = marked[EXCHANGE];
  marked[EXCHANGE] = exchange;
}

/** The innermost leasehold middleware that admitted this request, if any. */
export function enclosingOf(c: Context): HonoExchange | undefined {
  return (c as Marked)[EXCHANGE];
}

/** The stream the handler last made a response's body from (`stream()`, `streamSSE()`, `c.body(stream)`), if any. */
export function streamed(c: Context): ReadableStream<Uint8Array> | undefined {
  const made = (c as Marked)[STREAMED];
  return made === false ? undefined : made;
}

type MakeResponse = (data: unknown, arg?: unknown, headers?: unknown) => Response;

/**
 * Watches how the handler makes its response: Hono's stream helpers (`stream`, `streamText`,
 * `streamSSE`) call `c.newResponse` with their stream, whose producer works on after the handler
 * returned, so the permit must wait for that stream's end. `c.newResponse` and `c.body` make the same
 * response; one function per request replaces both (a method reading `this` would break a handler
 * that calls them detached, as Hono's own arrow functions allow). Reading `c.res.body` instead would
 * take every response off `@hono/node-server`'s fast path.
 */
export function watchStreams(c: Context): void {
  const marked = c as Context & Marked;
  if (marked[STREAMED] !== undefined) return;
  marked[STREAMED] = false;
  const make = c.newResponse as unknown as MakeResponse;
  const watching: MakeResponse = (data, arg, headers) => {
    if (typeof (data as ReadableStream | null)?.getReader !== "function") return make(data, arg, headers);
    const made = data as ReadableStream<Uint8Array>;
    marked[STREAMED] = made;
    const response = make(data, arg, headers);
    const exchange = marked[EXCHANGE];
    exchange?.late?.(exchange, made);
    return response;
  };
  c.newResponse = watching as unknown as Context["newResponse"];
  c.body = watching as unknown as Context["body"];
}
