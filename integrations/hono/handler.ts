import type { Context, Handler, Next } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { Admission } from "../http/admission.js";
import { type Admitted, type Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import { cancelDropped, dropBody, holdBody, streamedBody, unsent } from "./body.js";
import { LeaseRejectedException } from "./exception.js";
import {
  admitFailed,
  answeredAbove,
  answerLoss,
  enclosingOf,
  HonoExchange,
  handlerFailed,
  lostDuringBody,
  lostFirst,
  nodeResponse,
  ownAnswer,
  type Route,
  streamed,
  watchStreams,
} from "./request.js";
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
 * settled and the response's last byte is written, released once. The wrap sees the handler's own
 * promise, so its permit is held until the handler ends whatever middleware answered first (a
 * `timeout()`), and it tells every leasehold middleware that admitted the request before it when
 * the handler ends. Behind the same guard installed as middleware (`app.use`), it takes no second
 * permit: it runs the handler under the middleware's lease and reports the handler's end to it.
 */
export function guarded(admission: Admission<Context, HonoOnRejected>, route: Route, handler: Handler): Handler {
  const { name, disconnectGraceMs } = admission.config;
  return function leaseholdGuarded(c: Context, next: Next) {
    const enclosing = enclosingOf(c);
    for (let outer = enclosing; outer !== undefined; outer = outer.enclosing) {
      if (outer.route === route) return reporting(enclosing as HonoExchange, handler, c, next);
    }
    const exchange = new GuardedExchange(name, disconnectGraceMs, c, next, nodeResponse(c.env), route);
    exchange.handler = handler;
    exchange.enclosing = enclosing;
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

/** Tells the leasehold middlewares around a wrapped handler that it runs: `next()` settling is not its end. */
function handlerStarted(enclosing: HonoExchange | undefined): void {
  for (let outer = enclosing; outer !== undefined; outer = outer.enclosing) {
    outer.reported = true;
    outer.partStarted();
  }
}

function handlerEnded(enclosing: HonoExchange | undefined): void {
  for (let outer = enclosing; outer !== undefined; outer = outer.enclosing) outer.partEnded();
}

/** Runs a handler the middleware has admitted already, telling the middlewares around it when it starts and ends. */
function reporting(enclosing: HonoExchange, handler: Handler, c: Context, next: Next): Answer {
  handlerStarted(enclosing);
  let result: Answer;
  try {
    result = handler(c, next) as Answer;
  } catch (error) {
    handlerEnded(enclosing);
    throw error;
  }
  if (typeof (result as PromiseLike<unknown> | null)?.then !== "function") {
    handlerEnded(enclosing);
    return result;
  }
  return (result as Promise<Response | undefined>).then(
    (response) => {
      handlerEnded(enclosing);
      return response;
    },
    (error: unknown) => {
      handlerEnded(enclosing);
      throw error;
    },
  );
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
  exchange.partStarted();
  exchange.errorBefore = c.error;
  watchStreams(c);
  handlerStarted(exchange.enclosing);
  let result: unknown;
  try {
    result = exchange.handler(c, exchange.next);
  } catch (error) {
    handlerEnded(exchange.enclosing);
    exchange.partEnded();
    const own = ownAnswerTo(exchange, error);
    if (own !== undefined) return own;
    if (exchange.outgoing === undefined) exchange.responded();
    throw error;
  }
  if (typeof (result as PromiseLike<unknown> | null)?.then !== "function") {
    handlerEnded(exchange.enclosing);
    try {
      return finish(exchange, result as Response | undefined);
    } finally {
      exchange.partEnded();
    }
  }
  return new Promise<Response | undefined>((resolve, reject) => {
    exchange.resolve = resolve;
    exchange.reject = reject;
    // A loss before the handler settles is answered 503 (the handler is told through its signal).
    exchange.onLost = lostFirst as Exchange["onLost"];
    (result as PromiseLike<Response | undefined>).then(
      (response) => settled(exchange, response),
      (error: unknown) => failed(exchange, error),
    );
  });
}

function settled(exchange: GuardedExchange, response: Response | undefined): void {
  handlerEnded(exchange.enclosing);
  if (exchange.answered) {
    cancelDropped(exchange);
    exchange.partEnded();
    return;
  }
  if (exchange.lost !== undefined) {
    answerLoss(exchange);
    cancelDropped(exchange);
    exchange.partEnded();
    exchange.resolve(undefined);
    return;
  }
  try {
    exchange.resolve(finish(exchange, response));
  } catch (error) {
    if (exchange.outgoing === undefined) exchange.responded();
    exchange.reject(error);
  }
  exchange.partEnded();
}

function failed(exchange: GuardedExchange, error: unknown): void {
  handlerEnded(exchange.enclosing);
  if (exchange.answered || exchange.lost !== undefined) {
    handlerFailed(exchange, error);
    return;
  }
  const own = ownAnswerTo(exchange, error);
  if (own === undefined) {
    handlerFailed(exchange, error);
    return;
  }
  exchange.resolve(own);
  exchange.partEnded();
}

/**
 * The documented answer to one of leasehold's own errors, rethrown by the handler (it passed its
 * signal on): given here, so that Hono's `onError` never sees it. Its small body is not waited for.
 */
function ownAnswerTo(exchange: GuardedExchange, error: unknown): Response | undefined {
  const answer = ownAnswer(exchange, error);
  if (answer === undefined) return undefined;
  // Answered: a loss from now on needs no 503 of its own.
  exchange.answered = true;
  if (exchange.outgoing === undefined) exchange.responded();
  return answer;
}

/** The handler's response, with the fence if asked, held until its last byte. */
function finish(exchange: GuardedExchange, response: Response | undefined): Response | undefined {
  const { c, outgoing } = exchange;
  exchange.onLost = lostDuringBody as Exchange["onLost"];
  // A middleware before the wrap (a `timeout()`) answered while the handler ran: Hono sends that
  // answer and drops this one.
  if (c.error !== exchange.errorBefore || answeredAbove(exchange)) {
    unsent(exchange, c.error === exchange.errorBefore ? undefined : c.error);
    return response;
  }
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
  const work = streamed(c) !== undefined || (sent !== undefined && streamedBody(sent));
  if (sent === undefined) {
    if (outgoing === undefined) exchange.responded();
    return sent;
  }
  // Hono answers HEAD with the GET handler's status and headers, and drops its body unread.
  if (c.req.method === "HEAD") dropBody(sent, exchange, work);
  // On Node the response's own events say when it is complete; a streamed body is also work.
  // Off Node the body's end is the response's: every body is held.
  else if (outgoing === undefined || work) sent = holdBody(sent, exchange, work);
  // A handler that set `c.res` and returned nothing: behind other middleware Hono sends `c.res`.
  if (response === undefined) {
    c.res = undefined;
    c.res = sent;
  }
  return sent;
}
