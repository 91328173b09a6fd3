import type { ServerResponse } from "node:http";
import type { Context, Handler, MiddlewareHandler, Next } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { CloseOptions } from "../../src/options/types.js";
import { Admission } from "../http/admission.js";
import { parseAdmissionOptions } from "../http/config.js";
import { type Admitted, type Exchange, FENCE_HEADER, LeaseView } from "../http/exchange.js";
import type { AdmissionRoute, Closable } from "../http/types.js";
import { holdBody } from "./body.js";
import { LeaseRejectedException } from "./exception.js";
import { guarded } from "./handler.js";
import { admitFailed, cutResponse, HonoExchange, handlerFailed, lostFirst, nodeResponse, type Route } from "./request.js";
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
