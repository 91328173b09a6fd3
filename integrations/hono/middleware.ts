import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { withoutStack } from "../../src/errors/base.js";
import type { LeaseLostError } from "../../src/errors.js";
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

/** Cuts a response whose body was already being written when the lease was lost. */
function cutResponse(this: Exchange): void {
  this.response?.destroy();
}

/**
 * Runs the handler, and settles with `undefined` when it settles, or with the
 * LeaseLostError if the lease is lost first (the adapter then answers 503
 * itself). The exchange hears when the handler's work ends, either way.
 */
function handle(exchange: Exchange, next: () => Promise<void>): Promise<LeaseLostError | undefined> {
  exchange.workStarted();
  return new Promise<LeaseLostError | undefined>((resolve, reject) => {
    exchange.onLost = function lostFirst(error) {
      resolve(error);
    };
    next().then(
      () => {
        exchange.workEnded();
        resolve(undefined);
      },
      (error: unknown) => {
        exchange.workEnded();
        reject(error);
      },
    );
  });
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
  const handler: MiddlewareHandler = async function leasehold(c, next) {
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

    const outcome = await admission.admit(c, exchange);
    if (outcome === "passed") {
      await next();
      return;
    }
    if (outcome === "abandoned") return new Response(null, { status: 499 });
    if (!(outcome instanceof LeaseView)) {
      if (onRejected !== undefined) return onRejected(c, outcome);
      throw withoutStack(() => new LeaseRejectedException(outcome));
    }

    c.set("lease", outcome);
    // The permit covers the handler until it settles, even if its client left or we answered first.
    let lost: LeaseLostError | undefined;
    try {
      lost = await handle(exchange, next);
    } catch (error) {
      if (outgoing === undefined) exchange.responded();
      throw error;
    }
    if (lost !== undefined) {
      exchange.onLost = () => {};
      // The handler may have finished in the same turn; our answer replaces its response whole
      // (clearing first, so Hono does not merge the handler's headers into it).
      c.res = undefined;
      c.res = problemResponse(leaseLostRejection(lost, exchange.id, exchange.limit));
      if (outgoing === undefined) exchange.responded();
      return;
    }
    // Nothing is written before the middleware chain returns, streamed bodies included. A stacked
    // leasehold middleware inside this one has set its own: the innermost's fence is sent, as in Express.
    if (exposeFence && !c.res.headers.has(FENCE_HEADER)) setHeader(c, FENCE_HEADER, String(outcome.fence));
    // The response exists but its body may still be streaming: hold the lease until its last byte.
    if (outgoing !== undefined) exchange.onLost = cutResponse;
    // Hono answers HEAD with the GET handler's status and headers, and drops its body unread:
    // holding the permit until that body's end would hold it for good.
    else if (c.req.method === "HEAD") exchange.responded();
    else c.res = holdBody(c.res, exchange);
  };
  return Object.assign(handler, { close: (options?: CloseOptions) => admission.close(options) });
}
