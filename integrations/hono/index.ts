/**
 * Hono middleware: `semaphore(name, limit, options)` and `lock(name, options)`, on Node and fetch runtimes.
 *
 * @module leasehold/hono
 */
import type { ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import type { LeaseLostError } from "../../src/errors.js";
import type { Closable, CloseOptions } from "../../src/holdings.js";
import { Admission } from "../../src/http/admission.js";
import { Exchange, FENCE_HEADER, LeaseView, type RequestLease } from "../../src/http/exchange.js";
import { watchNodeResponse } from "../../src/http/node-response.js";
import {
  type AdmissionRoute,
  type LockAdmissionOptions,
  parseAdmissionOptions,
  type SemaphoreAdmissionOptions,
} from "../../src/http/options.js";
import { leaseLostRejection, type Rejection, withoutStackTrace } from "../../src/http/problem.js";
import type { LockLease, SemaphoreLease } from "../../src/lease.js";
import { holdBody } from "./body.js";

/**
 * What the middleware sets on the context, as hono's own middleware export
 * theirs (`JwtVariables`): `c.get("lease")`, absent when the request was
 * skipped or let through by `onStoreError: "fail-open"`. Routes registered
 * with the middleware inline are typed already; declare it on the app when
 * the middleware is installed with `app.use`.
 *
 * @example
 * ```ts
 * const app = new Hono<{ Variables: LeaseholdVariables<SemaphoreLease> }>();
 * app.use("/chat/*", semaphore("openai", 20));
 * app.post("/chat/complete", (c) => c.json({ heldBy: c.get("lease")?.key }));
 * ```
 */
export type LeaseholdVariables<Lease extends RequestLease = RequestLease> = {
  lease: Lease | undefined;
};

/**
 * What a refused request throws: an `HTTPException` whose `getResponse()` is
 * the problem+json response (503 or 409, Retry-After), so `app.onError` can
 * pass it on or reformat it. `rejection` has the details.
 *
 * @example
 * ```ts
 * app.onError((error, c) => {
 *   if (error instanceof LeaseRejectedException) return c.json({ busy: error.rejection.problem.key }, error.status);
 *   return error instanceof HTTPException ? error.getResponse() : c.text("oops", 500);
 * });
 * ```
 */
export class LeaseRejectedException extends HTTPException {
  readonly rejection: Rejection;

  constructor(rejection: Rejection) {
    super(rejection.status as HTTPException["status"], { message: rejection.problem.detail, cause: rejection.error });
    this.name = "LeaseRejectedException";
    this.rejection = rejection;
  }

  /** The problem+json response with its Retry-After, made when asked for (a `Response` is costly to build). */
  override getResponse(): Response {
    return problemResponse(this.rejection);
  }
}

function problemResponse(rejection: Rejection): Response {
  return new Response(JSON.stringify(rejection.problem), { status: rejection.status, headers: rejection.headers });
}

/**
 * Your own response to a refusal, instead of throwing `LeaseRejectedException`.
 *
 * @example
 * ```ts
 * const onRejected: HonoOnRejected = (c, rejection) => c.json({ busy: rejection.problem.key }, 429);
 * ```
 */
export type HonoOnRejected = (c: Context, rejection: Rejection) => Response | Promise<Response>;

/**
 * Options of the Hono {@link semaphore} middleware.
 *
 * @example
 * ```ts
 * const options: HonoSemaphoreOptions = { client: redis, key: (c) => c.req.param("tenant") ?? "shared", waitMs: 2_000 };
 * ```
 */
export interface HonoSemaphoreOptions extends SemaphoreAdmissionOptions<Context, HonoOnRejected> {}

/**
 * Options of the Hono {@link lock} middleware.
 *
 * @example
 * ```ts
 * const options: HonoLockOptions = { client: redis, key: (c) => c.req.param("id")!, ttlMs: 10_000 };
 * ```
 */
export interface HonoLockOptions extends LockAdmissionOptions<Context, HonoOnRejected> {}

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
 * What {@link semaphore} and {@link lock} make: the middleware, and its
 * `close()` for a clean shutdown (see docs/operations.md, Shutting down).
 *
 * @example
 * ```ts
 * const chat: LeaseholdMiddleware<SemaphoreLease> = semaphore("openai", 20, { client: redis });
 * process.once("SIGTERM", () => void chat.close({ graceMs: 10_000 }));
 * ```
 */
export type LeaseholdMiddleware<Lease extends RequestLease = RequestLease> = MiddlewareHandler<{
  Variables: LeaseholdVariables<Lease>;
}> &
  Closable;

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

function middleware(route: AdmissionRoute<Context, HonoOnRejected>, where: string): MiddlewareHandler & Closable {
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
      throw withoutStackTrace(() => new LeaseRejectedException(outcome));
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

/**
 * Hono middleware that admits a request only while it holds one of `limit`
 * permits of `name` (or of `<name>:<key(c)>`). A full semaphore throws a
 * `LeaseRejectedException` (503, Retry-After, problem+json) for
 * `app.onError`. The permit is held until the handler has settled and the
 * response body is finished; the handler reads it as `c.get("lease")`, whose
 * `signal` aborts when it is lost, the client leaves, or the middleware is
 * closed (`close()`, for a clean shutdown). After
 * a disconnect it is held until the handler settles (or releases the lease),
 * at the latest `disconnectGraceMs`.
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/hono";
 *
 * // 20 calls in flight per tenant; a request without a tenant header is not limited per tenant.
 * const perTenant = semaphore("openai", 20, {
 *   client: redis,
 *   skip: (c) => c.req.header("x-tenant-id") === undefined,
 *   key: (c) => c.req.header("x-tenant-id")!,
 * });
 * app.post("/chat", perTenant, async (c) => {
 *   return c.json(await callModel(await c.req.json(), { signal: c.get("lease")?.signal }));
 * });
 * ```
 */
export function semaphore(
  name: string,
  limit: number | ((c: Context) => number),
  options?: HonoSemaphoreOptions,
): LeaseholdMiddleware<SemaphoreLease> {
  return middleware({ kind: "semaphore", name, limit, options }, "semaphore middleware");
}

/**
 * Hono middleware that admits one request at a time per `name` (or per
 * `<name>:<key(c)>`); a held lock throws a 409 `LeaseRejectedException`.
 *
 * @example
 * ```ts
 * import { lock } from "leasehold/hono";
 * // A middleware does not know its route's path, so Hono types a parameter as possibly
 * // undefined; on "/orders/:id/pay" it is always there.
 * app.post("/orders/:id/pay", lock("order", { client: redis, key: (c) => c.req.param("id")! }), pay);
 * ```
 */
export function lock(name: string, options?: HonoLockOptions): LeaseholdMiddleware<LockLease> {
  return middleware({ kind: "lock", name, options }, "lock middleware");
}

export type { Closable, CloseOptions } from "../../src/holdings.js";
export { PROBLEM_TYPES, type ProblemDetails, type RejectionContext, type RejectionReason } from "../../src/http/problem.js";
export type { LockLease, SemaphoreLease } from "../../src/lease.js";
export type { Rejection, RequestLease };
