import type { FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import type { Closable, LockAdmissionOptions, Rejection, RequestLease, SemaphoreAdmissionOptions } from "../http/types.js";

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The lease this request holds, set by a leasehold hook. Absent when the
     * request was skipped or let through by `onStoreError: "fail-open"`.
     */
    lease?: RequestLease;
  }
}

/**
 * Replaces the default problem response of a refused request. It must answer
 * through `reply` (the request goes no further).
 *
 * @example
 * ```ts
 * const onRejected: FastifyOnRejected = (_request, reply, rejection) => {
 *   reply.code(429).headers(rejection.headers).send({ busy: rejection.problem.key, retryAfter: rejection.retryAfter });
 * };
 * ```
 */
export type FastifyOnRejected = (request: FastifyRequest, reply: FastifyReply, rejection: Rejection) => void;

/**
 * Options of the Fastify {@link semaphore} hook.
 *
 * @example
 * ```ts
 * const options: FastifySemaphoreOptions = { client: redis, key: (req) => String(req.headers["x-tenant-id"]), waitMs: 2_000 };
 * ```
 */
export interface FastifySemaphoreOptions extends SemaphoreAdmissionOptions<FastifyRequest, FastifyOnRejected> {}

/**
 * Options of the Fastify {@link lock} hook.
 *
 * @example
 * ```ts
 * const options: FastifyLockOptions = { client: redis, key: (req) => (req.params as { id: string }).id, ttlMs: 10_000 };
 * ```
 */
export interface FastifyLockOptions extends LockAdmissionOptions<FastifyRequest, FastifyOnRejected> {}

/**
 * What {@link semaphore} and {@link lock} make: an `onRequest` hook, and its
 * `close()` for a clean shutdown (see docs/operations.md, Shutting down).
 *
 * @example
 * ```ts
 * const chat: LeaseholdHook = semaphore("openai", 20, { client: redis });
 * app.post("/chat", { onRequest: chat }, handler);
 * app.addHook("preClose", () => chat.close({ graceMs: 10_000 }));
 * ```
 */
export type LeaseholdHook = onRequestHookHandler & Closable;
