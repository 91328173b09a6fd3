import type { Context, Handler, Next } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { Admission } from "../http/admission.js";
import type { Admitted } from "../http/exchange.js";
import { type Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import { holdBody } from "./body.js";
import { LeaseRejectedException } from "./exception.js";
import { admitFailed, cutResponse, HonoExchange, handlerFailed, lostFirst, nodeResponse, type Route } from "./request.js";
import type { HonoOnRejected } from "./types.js";

/** What a guarded handler returns: a response at once when it can. */
type Answer = Response | Promise<Response | undefined> | undefined;

/** A guarded handler's exchange: the handler it guards, and an outcome told within `admitTo`. */
class GuardedExchange extends HonoExchange {
  handler!: Handler;
  outcome: Admitted | undefined;
  failure: { error: unknown } | undefined;
}

function keepOutcome(this: GuardedExchange, outcome: Admitted): void {
  this.outcome = outcome;
}

function keepFailure(this: GuardedExchange, error: unknown): void {
  this.failure = { error };
}

/** The outcome told after `admitTo` returned (a store that answers later): settles the handler's promise. */
function admittedLater(this: GuardedExchange, outcome: Admitted): void {
  try {
    this.resolve(answer(this, outcome) as Response | Promise<Response>);
  } catch (error) {
    this.reject(error);
  }
}

/**
 * `middleware.wrap(handler)`: the route's handler guarded by the middleware's admission, as one
 * handler. Hono calls a route with a single handler without its `async` middleware chain, and
 * `@hono/node-server` writes a response returned at once on its fast path: on the embedded store,
 * whose admission answers within the call, a handler that answers at once keeps both. Same
 * guarantees as the middleware: 503 + Retry-After on refusal, the permit held until the handler
 * settled and the response's last byte is written, released once.
 */
export function guarded(admission: Admission<Context, HonoOnRejected>, route: Route, handler: Handler): Handler {
  const { name, disconnectGraceMs } = admission.config;
  return function leaseholdGuarded(c: Context, next: Next) {
    const exchange = new GuardedExchange(name, disconnectGraceMs, c, next, nodeResponse(c.env), route);
    exchange.handler = handler;
    exchange.admitted = keepOutcome as Exchange["admitted"];
    exchange.admitFailed = keepFailure as Exchange["admitFailed"];
    admission.admitTo(c, exchange);
    if (exchange.failure !== undefined) throw exchange.failure.error;
    if (exchange.outcome !== undefined) return answer(exchange, exchange.outcome);
    return new Promise<Response | undefined>((resolve, reject) => {
      exchange.resolve = resolve;
      exchange.reject = reject;
      exchange.admitted = admittedLater as Exchange["admitted"];
      exchange.admitFailed = admitFailed as Exchange["admitFailed"];
    });
  };
}

/** What the request gets for its outcome: the handler's response, or the refusal's. Throws what Hono's `onError` should see. */
function answer(exchange: GuardedExchange, outcome: Admitted): Answer {
  const { c } = exchange;
  if (outcome instanceof LeaseView) return serve(exchange, outcome);
  if (outcome === "passed") return exchange.handler(c, exchange.next) as Answer;
  if (outcome === "abandoned") return new Response(null, { status: 499 });
  if (exchange.route.onRejected !== undefined) return exchange.route.onRejected(c, outcome);
  throw withoutStack(() => new LeaseRejectedException(outcome));
}

/** Runs the handler under its lease: its response at once if it answers at once, else a promise of it. */
function serve(exchange: GuardedExchange, view: LeaseView): Answer {
  const { c } = exchange;
  c.set("lease", view);
  exchange.view = view;
  exchange.workStarted();
  let result: unknown;
  try {
    result = exchange.handler(c, exchange.next);
  } catch (error) {
    exchange.workEnded();
    if (exchange.outgoing === undefined) exchange.responded();
    throw error;
  }
  if (typeof (result as PromiseLike<unknown> | null)?.then !== "function") {
    exchange.workEnded();
    return finish(exchange, result as Response | undefined);
  }
  return new Promise<Response | undefined>((resolve, reject) => {
    exchange.resolve = resolve;
    exchange.reject = reject;
    // A loss before the handler settles is answered 503 at once (the permit covers the handler until it settles).
    exchange.onLost = lostFirst as Exchange["onLost"];
    (result as PromiseLike<Response | undefined>).then(
      (response) => settled(exchange, response),
      (error: unknown) => handlerFailed(exchange, error),
    );
  });
}

function settled(exchange: GuardedExchange, response: Response | undefined): void {
  exchange.workEnded();
  if (exchange.answered) return;
  try {
    exchange.resolve(finish(exchange, response));
  } catch (error) {
    if (exchange.outgoing === undefined) exchange.responded();
    exchange.reject(error);
  }
}

/** The handler's response, with the fence if asked, held until its last byte. */
function finish(exchange: GuardedExchange, response: Response | undefined): Response | undefined {
  const { c, outgoing } = exchange;
  let sent = response ?? (c.finalized ? c.res : undefined);
  if (sent !== undefined && exchange.route.exposeFence && !sent.headers.has(FENCE_HEADER)) {
    const fence = String((exchange.view as LeaseView).fence);
    try {
      sent.headers.set(FENCE_HEADER, fence);
    } catch {
      // Immutable headers (a response from `fetch`): a copy carries it.
      sent = new Response(sent.body, sent);
      sent.headers.set(FENCE_HEADER, fence);
    }
  }
  // On Node the response's own events end the exchange: a loss during the body cuts it.
  if (outgoing !== undefined) exchange.onLost = cutResponse;
  // Hono answers HEAD with the GET handler's status and headers, and drops its body unread.
  else if (sent === undefined || c.req.method === "HEAD") exchange.responded();
  else sent = holdBody(sent, exchange);
  return sent;
}
