/**
 * Hono middleware: `semaphore(name, limit, options)` and `lock(name, options)`, on Node and fetch runtimes.
 *
 * @module leasehold/hono
 */
import type { Context } from "hono";
import type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
import type { Rejection, RequestLease } from "../http/types.js";
import { middleware } from "./middleware.js";
import type { HonoLockOptions, HonoSemaphoreOptions, LeaseholdMiddleware } from "./types.js";

/**
 * Hono middleware that admits a request only while it holds one of `limit`
 * permits of `name` (or of `<name>:<key(c)>`). A full semaphore throws a
 * `LeaseRejectedException` (503, Retry-After, problem+json) for
 * `app.onError`. The permit is held until the handler has settled and the
 * response body is finished (a stream helper's callback has returned); the
 * handler reads it as `c.get("lease")`, whose `signal` aborts when it is lost,
 * the client leaves, or the middleware is closed (`close()`, for a clean
 * shutdown). After a disconnect it is held until the handler settles (or
 * releases the lease), at the latest `disconnectGraceMs`. Behind another
 * middleware that may answer first (a `timeout()`), wrap the handler
 * (`middleware.wrap(handler)`) so that its end is seen: see docs/adapters.md.
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

export type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
export type { CloseOptions } from "../../src/options/types.js";
export { PROBLEM_TYPES } from "../http/problem.js";
export type { Closable, ProblemDetails, ProblemType, RejectionContext, RejectionReason } from "../http/types.js";
export { LeaseRejectedException } from "./exception.js";
export type {
  GuardableHandler,
  HonoLockOptions,
  HonoOnRejected,
  HonoSemaphoreOptions,
  LeaseholdMiddleware,
  LeaseholdVariables,
} from "./types.js";
export type { Rejection, RequestLease };
