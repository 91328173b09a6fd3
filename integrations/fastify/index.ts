/**
 * Fastify (5) hooks: `semaphore(name, limit, options)` and `lock(name, options)`, used as a
 * route's `onRequest`, and the {@link leasehold} plugin for shared defaults.
 *
 * @module leasehold/fastify
 */
import type { FastifyRequest } from "fastify";
import type { Rejection, RequestLease } from "../http/types.js";
import { hook } from "./hook.js";
import type { FastifyLockOptions, FastifySemaphoreOptions, LeaseholdHook } from "./types.js";

/**
 * Fastify `onRequest` hook that admits a request only while it holds one of
 * `limit` permits of `name` (or of `<name>:<key(request)>`). A full semaphore
 * answers 503 with Retry-After and a problem+json body, through the reply.
 * The permit is held until the response's last byte (a stream sent with
 * `reply.send(stream)` keeps it to its end; a hijacked reply, until it ends
 * `reply.raw`), and the handler reads it as `request.lease`, whose `signal`
 * aborts when it is lost, the client leaves, or the hook is closed
 * (`close()`, for a clean shutdown). After a disconnect the permit is held
 * until the handler ends the response, releases the lease or fails, at the
 * latest `disconnectGraceMs`. A handler that fails returns its permit at once;
 * leasehold's own abort reasons (the signal's reason rethrown, or an
 * `AbortError` caused by it) are answered as documented (503 `shutting-down`
 * or `lease-lost`; nothing for a client that left) and never reach the app's
 * error handler; every other error does, unchanged (see docs/adapters.md).
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/fastify";
 *
 * // 20 calls in flight per tenant.
 * const perTenant = semaphore("openai", 20, {
 *   client: redis,
 *   key: (req) => req.headers["x-tenant-id"] as string,
 *   skip: (req) => req.headers["x-tenant-id"] === undefined,
 * });
 * app.post("/chat", { onRequest: perTenant }, async (request) => {
 *   return callModel(request.body, { signal: request.lease?.signal });
 * });
 * ```
 */
export function semaphore(
  name: string,
  limit: number | ((request: FastifyRequest) => number),
  options?: FastifySemaphoreOptions,
): LeaseholdHook {
  return hook({ kind: "semaphore", name, limit, options }, "semaphore hook");
}

/**
 * Fastify `onRequest` hook that admits one request at a time per `name` (or
 * per `<name>:<key(request)>`). A held lock answers 409 with Retry-After and a
 * problem+json body. Held until the response is finished; after a
 * disconnect, as for {@link semaphore}.
 *
 * @example
 * ```ts
 * import { lock } from "leasehold/fastify";
 * app.post("/orders/:id", { onRequest: lock("order", { client: redis, key: (req) => (req.params as { id: string }).id }) }, pay);
 * ```
 */
export function lock(name: string, options?: FastifyLockOptions): LeaseholdHook {
  return hook({ kind: "lock", name, options }, "lock hook");
}

export type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
export type { CloseOptions } from "../../src/options/types.js";
export { PROBLEM_TYPES } from "../http/problem.js";
export type {
  Closable,
  ProblemDetails,
  ProblemType,
  RejectionContext,
  RejectionReason,
  SharedAdmissionOptions,
} from "../http/types.js";
export { type LeaseholdDecorator, type LeaseholdPluginOptions, leasehold } from "./plugin.js";
export type { FastifyLockOptions, FastifyOnRejected, FastifySemaphoreOptions, LeaseholdHook } from "./types.js";
export type { Rejection, RequestLease };
