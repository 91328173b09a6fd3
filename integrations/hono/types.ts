import type { Context, MiddlewareHandler } from "hono";
import type { Closable } from "../../src/holdings.js";
import type { RequestLease } from "../../src/http/exchange.js";
import type { LockAdmissionOptions, SemaphoreAdmissionOptions } from "../../src/http/options.js";
import type { Rejection } from "../../src/http/problem.js";

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
