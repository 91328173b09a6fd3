import type { Context, Handler, MiddlewareHandler } from "hono";
import type { Closable, LockAdmissionOptions, Rejection, RequestLease, SemaphoreAdmissionOptions } from "../http/types.js";

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
 * Any Hono handler, whatever its environment, path and input types: `wrap` returns the one it was given.
 *
 * @example
 * ```ts
 * const ok: GuardableHandler = (c) => c.text("ok");
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: Hono's own default for "any environment, path, input"; the handler's type is kept.
export type GuardableHandler = Handler<any, any, any, any>;

/**
 * What {@link semaphore} and {@link lock} make: the middleware, its
 * `close()` for a clean shutdown (see docs/operations.md, Shutting down),
 * and `wrap(handler)`, the same guard as one handler.
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
  Closable & {
    /**
     * The route's handler guarded by this middleware's admission, as a single handler: the same
     * guarantees as `app.get(path, middleware, handler)`, without Hono's `async` middleware chain.
     * Hono calls a route with one handler directly, and `@hono/node-server` writes a response
     * returned at once on its fast path: on the embedded store a handler that answers at once
     * keeps both. The wrap sees the handler's own promise, so its permit stays with a handler that
     * a middleware before it (a `timeout()`) answered for. Behind this middleware installed with
     * `app.use`, it takes no second permit: it runs the handler under the middleware's lease and
     * tells the middleware when the handler ends. The handler reads `c.get("lease")` typed
     * through the app's variables (`LeaseholdVariables`), as after `app.use`.
     *
     * @example
     * ```ts
     * const app = new Hono<{ Variables: LeaseholdVariables<SemaphoreLease> }>();
     * const reports = semaphore("reports", 4);
     * app.get("/report", reports.wrap((c) => c.json(build(c.get("lease")))));
     * // Behind a timeout(): the 504 goes out, the permit stays with the handler until it returns.
     * app.get("/slow-report", timeout(5_000), reports.wrap((c) => c.json(build(c.get("lease")))));
     * ```
     */
    wrap<H extends GuardableHandler>(handler: H): H;
  };
