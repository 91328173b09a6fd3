import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { Closable, CloseOptions } from "../../src/holdings.js";
import { Admission } from "../../src/http/admission.js";
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
 * The middleware of one route, `semaphore(...)` or `lock(...)`: admits the
 * request, runs the handler under its lease, and holds that lease until the
 * handler has settled and the response body is finished.
 */
export function middleware(route: AdmissionRoute<Context, HonoOnRejected>, where: string): MiddlewareHandler & Closable {
  const admission = new Admission(parseAdmissionOptions(route, where));
  const { name, disconnectGraceMs, onRejected, exposeFence } = admission.config;
  /**
   * The handler's work under its lease. Settles the middleware's promise when the handler settles,
   * or first, with a 503, when the lease is lost (the permit still covers the handler until it
   * settles). One promise per request, not an async frame plus a race: each cost a promise and ticks.
   */
  function serve(
    c: Context,
    next: () => Promise<void>,
    exchange: Exchange,
    outgoing: ServerResponse | undefined,
    view: LeaseView,
    resolve: (value: undefined) => void,
    reject: (error: unknown) => void,
  ): void {
    c.set("lease", view);
    exchange.workStarted();
    let answered = false;
    exchange.onLost = function lostFirst(error) {
      answered = true;
      this.onLost = ignoreLoss;
      // A turn later, as the race's `await` made it: a handler finishing in this same turn is replaced
      // whole (clearing first, so Hono does not merge the handler's headers into our answer).
      queueMicrotask(() => {
        c.res = undefined;
        c.res = problemResponse(leaseLostRejection(error, exchange.id, exchange.limit));
        if (outgoing === undefined) exchange.responded();
        resolve(undefined);
      });
    };
    next().then(
      () => {
        exchange.workEnded();
        if (answered) return;
        try {
          // Nothing is written before the middleware chain returns, streamed bodies included. A stacked
          // leasehold middleware inside this one has set its own: the innermost's fence is sent, as in Express.
          if (exposeFence && !c.res.headers.has(FENCE_HEADER)) setHeader(c, FENCE_HEADER, String(view.fence));
          // The response exists but its body may still be streaming: hold the lease until its last byte.
          if (outgoing !== undefined) exchange.onLost = cutResponse;
          // Hono answers HEAD with the GET handler's status and headers, and drops its body unread:
          // holding the permit until that body's end would hold it for good.
          else if (c.req.method === "HEAD") exchange.responded();
          else c.res = holdBody(c.res, exchange);
        } catch (error) {
          if (outgoing === undefined) exchange.responded();
          reject(error);
          return;
        }
        resolve(undefined);
      },
      (error: unknown) => {
        exchange.workEnded();
        if (answered) return;
        if (outgoing === undefined) exchange.responded();
        reject(error);
      },
    );
  }

  // Not `async`: the one promise below is the middleware's answer.
  const handler: MiddlewareHandler = function leasehold(c, next) {
    return new Promise<Response | undefined>((resolve, reject) => {
      const exchange = new Exchange(name, disconnectGraceMs);
      const outgoing = nodeResponse(c.env);
      if (outgoing !== undefined) watchNodeResponse(outgoing, exchange);
      else {
        // Off Node (Bun, Deno, Workers) the request's signal says the client left.
        const signal: AbortSignal | undefined = c.req.raw.signal;
        // Already aborted (the client left during an earlier middleware): no event will come.
        if (signal?.aborted) exchange.clientGone();
        else signal?.addEventListener("abort", () => exchange.clientGone(), { once: true });
      }
      admission.admit(c, exchange).then((outcome) => {
        try {
          if (outcome instanceof LeaseView) serve(c, next, exchange, outgoing, outcome, resolve, reject);
          else if (outcome === "passed") next().then(() => resolve(undefined), reject);
          else if (outcome === "abandoned") resolve(new Response(null, { status: 499 }));
          else if (onRejected !== undefined) resolve(onRejected(c, outcome));
          else reject(withoutStack(() => new LeaseRejectedException(outcome)));
        } catch (error) {
          // What a user's `onRejected` (or Hono's `next`) throws is the route's error, as an `async` middleware's would be.
          reject(error);
        }
      }, reject);
    });
  };
  return Object.assign(handler, { close: (options?: CloseOptions) => admission.close(options) });
}
