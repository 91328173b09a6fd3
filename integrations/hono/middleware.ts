import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { LeaseLostError } from "../../src/errors.js";
import type { Closable, CloseOptions } from "../../src/holdings.js";
import { Admission, type Admitted } from "../../src/http/admission.js";
import { parseAdmissionOptions } from "../../src/http/config.js";
import { Exchange, FENCE_HEADER, LeaseView } from "../../src/http/exchange.js";
import { watchNodeResponse } from "../../src/http/node-response.js";
import type { AdmissionRoute } from "../../src/http/options.js";
import { leaseLostRejection } from "../../src/http/problem.js";
import { holdBody } from "./body.js";
import { LeaseRejectedException, problemResponse } from "./exception.js";
import type { HonoOnRejected } from "./types.js";

/** The Node response behind a request served by `@hono/node-server`, if any. */
function nodeResponse(env: unknown): ServerResponse | undefined {
  if (typeof env !== "object" || env === null || !("outgoing" in env)) return undefined;
  const outgoing = env.outgoing;
  return typeof outgoing === "object" && outgoing !== null && "writableFinished" in outgoing
    ? (outgoing as ServerResponse)
    : undefined;
}

function ignoreLoss(): void {}

/** Cuts a response whose body was already being written when the lease was lost. */
function cutResponse(this: Exchange): void {
  this.response?.destroy();
}

/**
 * Sets a header on the handler's response, whatever made it. `c.header()`
 * would rebuild a finished response (on Node, off `@hono/node-server`'s fast
 * path); a response whose headers are immutable (one from `fetch`) is copied.
 */
function setHeader(c: Context, name: string, value: string): void {
  try {
    c.res.headers.set(name, value);
  } catch {
    const copy = new Response(c.res.body, c.res);
    copy.headers.set(name, value);
    c.res = undefined;
    c.res = copy;
  }
}
/**
 * One request through a leasehold middleware: the exchange and the adapter's own state in one object,
 * so that its callbacks are shared functions reading it (`this`), not closures made per request.
 */
class HonoExchange extends Exchange {
  /** The lease was lost before the handler settled: the middleware has answered (or will) with a 503. */
  answered = false;
  view: LeaseView | undefined;

  constructor(
    name: string,
    graceMs: number,
    readonly c: Context,
    readonly next: () => Promise<void>,
    readonly outgoing: ServerResponse | undefined,
    readonly resolve: (value: Response | PromiseLike<Response> | undefined) => void,
    readonly reject: (error: unknown) => void,
    readonly route: Route,
  ) {
    super(name, graceMs);
    this.admitted = admitted as Exchange["admitted"];
    this.admitFailed = admitFailed as Exchange["admitFailed"];
  }
}

/** What a route's middleware reads per request: its admission's settings. */
interface Route {
  readonly onRejected: HonoOnRejected | undefined;
  readonly exposeFence: boolean;
}

function admitFailed(this: HonoExchange, error: unknown): void {
  this.reject(error);
}

function admitted(this: HonoExchange, outcome: Admitted): void {
  const { c, route } = this;
  try {
    if (outcome instanceof LeaseView) serve(this, outcome);
    else if (outcome === "passed") this.next().then(() => this.resolve(undefined), this.reject);
    else if (outcome === "abandoned") this.resolve(new Response(null, { status: 499 }));
    else if (route.onRejected !== undefined) this.resolve(route.onRejected(c, outcome));
    else this.reject(withoutStack(() => new LeaseRejectedException(outcome)));
  } catch (error) {
    // What a user's `onRejected` (or Hono's `next`) throws is the route's error, as an `async` middleware's would be.
    this.reject(error);
  }
}

/** The lease was lost while the handler ran: answer 503 now (the permit still covers the handler until it settles). */
function lostFirst(this: HonoExchange, error: LeaseLostError): void {
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

/**
 * The handler's work under its lease. Settles the middleware's promise when the handler settles, or
 * first, with a 503, when the lease is lost.
 */
function serve(exchange: HonoExchange, view: LeaseView): void {
  exchange.c.set("lease", view);
  exchange.view = view;
  exchange.workStarted();
  exchange.onLost = lostFirst as Exchange["onLost"];
  exchange.next().then(
    () => handlerDone(exchange),
    (error: unknown) => handlerFailed(exchange, error),
  );
}

function handlerDone(exchange: HonoExchange): void {
  exchange.workEnded();
  if (exchange.answered) return;
  const { c, outgoing } = exchange;
  try {
    // Nothing is written before the middleware chain returns, streamed bodies included. A stacked
    // leasehold middleware inside this one has set its own: the innermost's fence is sent, as in Express.
    if (exchange.route.exposeFence && !c.res.headers.has(FENCE_HEADER)) {
      setHeader(c, FENCE_HEADER, String((exchange.view as LeaseView).fence));
    }
    // The response exists but its body may still be streaming: hold the lease until its last byte.
    if (outgoing !== undefined) exchange.onLost = cutResponse;
    // Hono answers HEAD with the GET handler's status and headers, and drops its body unread:
    // holding the permit until that body's end would hold it for good.
    else if (c.req.method === "HEAD") exchange.responded();
    else c.res = holdBody(c.res, exchange);
  } catch (error) {
    if (outgoing === undefined) exchange.responded();
    exchange.reject(error);
    return;
  }
  exchange.resolve(undefined);
}

function handlerFailed(exchange: HonoExchange, error: unknown): void {
  exchange.workEnded();
  if (exchange.answered) return;
  if (exchange.outgoing === undefined) exchange.responded();
  exchange.reject(error);
}

/**
 * The middleware of one route, `semaphore(...)` or `lock(...)`: admits the
 * request, runs the handler under its lease, and holds that lease until the
 * handler has settled and the response body is finished.
 */
export function middleware(route: AdmissionRoute<Context, HonoOnRejected>, where: string): MiddlewareHandler & Closable {
  const admission = new Admission(parseAdmissionOptions(route, where));
  const { config } = admission;
  const { name, disconnectGraceMs } = config;
  const settings: Route = { onRejected: config.onRejected, exposeFence: config.exposeFence };

  // Not `async`: the one promise below is the middleware's answer. On the embedded store the
  // admission answers within `admitTo`, and the handler starts in this same call.
  const handler: MiddlewareHandler = function leasehold(c, next) {
    return new Promise<Response | undefined>((resolve, reject) => {
      const outgoing = nodeResponse(c.env);
      const exchange = new HonoExchange(name, disconnectGraceMs, c, next, outgoing, resolve, reject, settings);
      if (outgoing !== undefined) watchNodeResponse(outgoing, exchange);
      else {
        // Off Node (Bun, Deno, Workers) the request's signal says the client left.
        const signal: AbortSignal | undefined = c.req.raw.signal;
        // Already aborted (the client left during an earlier middleware): no event will come.
        if (signal?.aborted) exchange.clientGone();
        else signal?.addEventListener("abort", () => exchange.clientGone(), { once: true });
      }
      admission.admitTo(c, exchange);
    });
  };
  return Object.assign(handler, { close: (options?: CloseOptions) => admission.close(options) });
}
