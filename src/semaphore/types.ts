import type { Holder, SemaphoreLease } from "../lease/types.js";
import type {
  CallOptions,
  CloseOptions,
  KeepingOptions,
  OwnerOptions,
  RetryOptions,
  TenantCallOptions,
  TenantFactoryOptions,
  WaitOptions,
} from "../options/types.js";
import type { ClientInput, StoreHealth } from "../store/access/types.js";

/**
 * Options of `acquire` on a semaphore.
 *
 * @example
 * ```ts
 * const lease = await slots.acquire("openai", { weight: 2, tenant: "acme", tenantLimit: 5 });
 * ```
 */
export interface SemaphoreAcquireOptions extends RetryOptions, WaitOptions, CallOptions, TenantCallOptions, OwnerOptions {
  /**
   * How long the permit is held without an extend, in ms.
   * @default the semaphore's leaseMs (60000)
   */
  leaseMs?: number;
  /**
   * How many permits to take at once, atomically. At most the limit.
   * @default 1
   */
  weight?: number;
  /**
   * The limit for this call, overriding the semaphore's. Lowering a limit
   * never revokes permits already held; it only stops new ones.
   */
  limit?: number;
}

/**
 * Options of `run` on a semaphore.
 *
 * @example
 * ```ts
 * await slots.run("openai", (lease) => callModel(prompt, { signal: lease.signal }), { leaseMs: 30_000, waitMs: 2_000 });
 * ```
 */
export interface SemaphoreRunOptions extends SemaphoreAcquireOptions, KeepingOptions {}

/**
 * Options of {@link semaphore}. Every `acquire`/`run` option may be given here as a default.
 *
 * @example
 * ```ts
 * const slots = semaphore({ client: redis, limit: (id) => (id.startsWith("batch:") ? 2 : 20), leaseMs: 60_000, waitMs: 1_000 });
 * ```
 */
export interface SemaphoreOptions extends RetryOptions, WaitOptions, KeepingOptions, TenantFactoryOptions, OwnerOptions {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store. Omitted: the process-wide embedded memory store.
   */
  client?: ClientInput;
  /** How many permits exist per id: a positive integer, or a function of the id for per-id limits. */
  limit: number | ((id: string) => number);
  /**
   * Key namespace; the store key of an id is `{<prefix>:semaphore:<id>}`.
   * @default "semaphore"
   */
  prefix?: string;
  /**
   * How long a permit is held without renewal, in ms. With `run` it is also the renewal window.
   * @default 60000
   */
  leaseMs?: number;
}

/**
 * A distributed counting semaphore; see {@link semaphore}.
 *
 * @example
 * ```ts
 * const slots: Semaphore = semaphore(redis, { limit: 20 });
 * const lease = await slots.acquire("openai");
 * if (!lease) throw new Error("busy");
 * try { await callModel(prompt, { signal: lease.signal }); }
 * finally { await lease.release(); }
 * ```
 */
export interface Semaphore {
  /**
   * Takes permits on `id`, or resolves `null` when they are all taken (after
   * any retries). The lease is not renewed in the background: call
   * `extend()` if the work can outlive it, and always `release()`. Its
   * `signal` aborts when its end passes without an `extend()`.
   */
  acquire(id: string, options?: SemaphoreAcquireOptions): Promise<SemaphoreLease | null>;
  /**
   * Runs `fn` holding permits on `id`, renewing the lease while it runs and
   * releasing it after. Rejects with `SemaphoreNotAcquiredError` when full,
   * and with `SemaphoreLeaseLostError` when the permit was lost while `fn`
   * ran, even if `fn` resolved.
   */
  run<T>(id: string, fn: (lease: SemaphoreLease) => T | PromiseLike<T>, options?: SemaphoreRunOptions): Promise<T>;
  /** Live holders of `id` (not permits: a weight-3 holder counts once). Lapsed leases are not counted. */
  count(id: string): Promise<number>;
  /**
   * Whether the store answers, as this process has seen it, without a round
   * trip: after a call fails to reach it, acquires and reads fail at once
   * with `StoreUnavailableError` until a probe answers.
   *
   * @example
   * ```ts
   * app.get("/healthz", async (_req, res) => {
   *   const health = await slots.health();
   *   res.status(health.state === "up" ? 200 : 503).json(health);
   * });
   * ```
   */
  health(): Promise<StoreHealth>;
  /**
   * Permit usage of `id` in one store round trip: the limit, permits used,
   * live holders, callers waiting, permits available, and how many tenants
   * hold or wait. With `{ tenant }`, the same for one tenant of the id, its
   * `limit` being its `tenantLimit` (the one passed here, a number or a
   * function of the tenant, or the semaphore's).
   */
  stats(id: string): Promise<SemaphoreStats>;
  stats(id: string, options: { tenant: string; tenantLimit?: number | ((tenant: string) => number) }): Promise<TenantStats>;
  /**
   * Who holds permits of `id` now, oldest first: each live lease's token,
   * owner, acquire time, end, weight and tenant (granted waiters included).
   * One store round trip, no writes; lapsed leases are left out.
   *
   * @example
   * ```ts
   * for (const h of await slots.holders("openai")) {
   *   log.info({ owner: h.owner, heldMs: Date.now() - (h.acquiredAt ?? Date.now()), weight: h.weight });
   * }
   * ```
   */
  holders(id: string): Promise<Holder[]>;
  /**
   * Lets go of everything this semaphore holds, for a clean shutdown. At once:
   * every later call is refused with `ShutdownError`, calls waiting in a queue
   * leave it (so no other process waits on them) and reject with it, and the
   * `signal` of every lease held aborts with it. Then, when the work has
   * stopped or `graceMs` has passed, every lease still held is released (one
   * whose work goes on is reported lost, with the `ShutdownError` as cause),
   * and the store is closed if leasehold made it from your client (with the
   * last semaphore or lock using it). A store or client you passed stays
   * open. Resolves when every permit is back; a second call returns the same
   * promise.
   *
   * @example
   * ```ts
   * process.once("SIGTERM", async () => {
   *   await slots.close({ graceMs: 10_000 });
   *   await redis.quit();
   * });
   * ```
   */
  close(options?: CloseOptions): Promise<void>;
}

/**
 * What {@link Semaphore.stats} reports.
 *
 * @example
 * ```ts
 * const { used, available, waiting } = await slots.stats("openai");
 * if (available === 0 && waiting > 10) log.warn({ used, waiting }, "openai saturated");
 * ```
 */
export interface SemaphoreStats {
  /**
   * The limit you passed: the semaphore's, or its limit function's answer for
   * the id. Not read from the store, so processes that pass different limits
   * for one id each report their own.
   */
  limit: number;
  /** Permits held by live leases (weights included). */
  used: number;
  /** Live leases; agrees with `count(id)`. */
  holders: number;
  /** Callers waiting in the queue. */
  waiting: number;
  /** `limit - used`, at least 0 (a lowered limit can leave `used` above it). */
  available: number;
  /** Tenants holding or waiting (callers without a tenant are not counted). */
  tenants: number;
}

/**
 * What {@link Semaphore.stats} reports for one tenant of an id.
 *
 * @example
 * ```ts
 * const acme = await slots.stats("openai", { tenant: "acme", tenantLimit: 5 });
 * console.log(`${acme.used}/${acme.limit} used, ${acme.waiting} waiting`);
 * ```
 */
export interface TenantStats {
  tenant: string;
  /** The tenant's cap: its `tenantLimit`. */
  limit: number;
  /** Permits the tenant's live leases hold. */
  used: number;
  /** The tenant's callers waiting. */
  waiting: number;
  /** `limit - used`, at least 0 (the id's own limit may still be in the way). */
  available: number;
}
