import type { ServerResponse } from "node:http";
import type { Context, Handler, MiddlewareHandler, Next } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { CloseOptions } from "../../src/options/types.js";
import { Admission } from "../http/admission.js";
import { parseAdmissionOptions } from "../http/config.js";
import { type Admitted, type Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import type { AdmissionRoute, Closable } from "../http/types.js";
import { cancelDropped, drainLate, dropBody, holdBody, streamedBody, unsent } from "./body.js";
import { LeaseRejectedException } from "./exception.js";
import { guarded } from "./handler.js";
import {
  admitFailed,
  answeredAbove,
  answerLoss,
  enter,
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
import type { GuardableHandler, HonoOnRejected } from "./types.js";

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
/** The middleware's exchange: told its outcome through the shared functions below. */
class MiddlewareExchange extends HonoExchange {
  constructor(name: string, graceMs: number, c: Context, next: Next, outgoing: ServerResponse | undefined, route: Route) {
    super(name, graceMs, c, next, outgoing, route);
    this.admitted = admitted as Exchange["admitted"];
    this.admitFailed = admitFailed as Exchange["admitFailed"];
  }
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

/**
 * The handler's work under its lease. Settles the middleware's promise when the handler settles, or
 * first, with a 503, when the lease is lost.
 */
function serve(exchange: HonoExchange, view: LeaseView): void {
  const { c } = exchange;
  c.set("lease", view);
  exchange.view = view;
  exchange.workStarted();
  exchange.partStarted();
  // Where the guard stands, to tell later whether `next()` settling can be the handler's end.
  exchange.routeIndex = c.req.routeIndex;
  exchange.errorBefore = c.error;
  enter(exchange);
  watchStreams(c);
  exchange.onLost = lostFirst as Exchange["onLost"];
  exchange.next().then(
    () => handlerDone(exchange),
    (error: unknown) => handlerFailed(exchange, error),
  );
}

/**
 * `next()` settled. Hono's `compose` has answered any error thrown below the guard (with the app's
 * `onError`) and set `c.error`; the handler's own promise is not in sight. `next()` settling is the
 * handler's end when the handler comes right after the guard, or when no error was answered below
 * it. When another middleware sits between them and an error was answered (a `timeout()`'s 504),
 * that middleware may have answered while the handler still works: the guard cannot tell, and keeps
 * the permit until `disconnectGraceMs`, then reports it lost with that error as the cause, rather
 * than admit one request too many. A handler wrapped by the same guard (`wrap`) reports its own end.
 */
function handlerDone(exchange: HonoExchange): void {
  const { c, outgoing } = exchange;
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
  const error = c.error === exchange.errorBefore ? undefined : c.error;
  if (answeredAbove(exchange)) {
    // What the handler made is dropped; the chain below the guard has returned, the handler with it.
    unsent(exchange, error);
    exchange.partEnded();
    exchange.resolve(undefined);
    return;
  }
  // leasehold's own error, rethrown by a handler that passed its signal on: the documented answer,
  // whatever the app's error handler made of it; the handler has stopped.
  const answer = error === undefined ? undefined : ownAnswer(exchange, error);
  const own = answer !== undefined;
  if (own) {
    c.res = undefined;
    c.res = answer;
  }
  const unseen = error !== undefined && !own && !exchange.reported && c.req.routeIndex > exchange.routeIndex + 1;
  try {
    // Nothing is written before the middleware chain returns, streamed bodies included. A stacked
    // leasehold middleware inside this one has set its own: the innermost's fence is sent, as in Express.
    if (exchange.route.exposeFence && !c.res.headers.has(FENCE_HEADER)) {
      setHeader(c, FENCE_HEADER, String((exchange.view as LeaseView).fence));
    }
    const work = streamed(c) !== undefined || streamedBody(c.res);
    exchange.onLost = lostDuringBody as Exchange["onLost"];
    // Hono answers HEAD with the GET handler's status and headers, and drops its body unread.
    if (c.req.method === "HEAD") dropBody(c.res, exchange, work);
    // On Node the response's own events say when it is complete; a streamed body is also work.
    // Off Node the body's end is the response's: every body is held.
    else if (outgoing === undefined || work) c.res = holdBody(c.res, exchange, work);
  } catch (error) {
    if (outgoing === undefined) exchange.responded();
    exchange.partEnded();
    exchange.reject(error);
    return;
  }
  if (unseen) {
    drainLate(exchange);
    exchange.workUnseen(error);
  } else exchange.partEnded();
  exchange.resolve(undefined);
}

/**
 * The middleware of one route, `semaphore(...)` or `lock(...)`: admits the
 * request, runs the handler under its lease, and holds that lease until the
 * handler has settled and the response body is finished.
 */
export function middleware(
  route: AdmissionRoute<Context, HonoOnRejected>,
  where: string,
): MiddlewareHandler & Closable & { wrap<H extends GuardableHandler>(handler: H): H } {
  const admission = new Admission(parseAdmissionOptions(route, where));
  const { config } = admission;
  const { name, disconnectGraceMs } = config;
  const settings: Route = { onRejected: config.onRejected, exposeFence: config.exposeFence };

  // Not `async`: the one promise below is the middleware's answer. On the embedded store the
  // admission answers within `admitTo`, and the handler starts in this same call.
  const handler: MiddlewareHandler = function leasehold(c, next) {
    return new Promise<Response | undefined>((resolve, reject) => {
      const exchange = new MiddlewareExchange(name, disconnectGraceMs, c, next, nodeResponse(c.env), settings);
      exchange.resolve = resolve;
      exchange.reject = reject;
      admission.admitTo(c, exchange);
    });
  };
  return Object.assign(handler, {
    close: (options?: CloseOptions) => admission.close(options),
    wrap: <H extends GuardableHandler>(route: H): H => guarded(admission, settings, route as Handler) as unknown as H,
  });
}
