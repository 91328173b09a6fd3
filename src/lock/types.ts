import type { Holder, LockLease } from "../lease/types.js";
import type { CallOptions, CloseOptions, KeepingOptions, OwnerOptions, RetryOptions, WaitOptions } from "../options/types.js";
import type { ClientInput, StoreHealth } from "../store/access/types.js";
import type { LockStats } from "../store/contract/types.js";

/**
 * Options of `acquire` on a lock.
 *
 * @example
 * ```ts
 * const lease = await locks.acquire("order:42", { ttlMs: 10_000, waitMs: 1_000 });
 * ```
 */
export interface LockAcquireOptions extends RetryOptions, WaitOptions, CallOptions, OwnerOptions {
  /**
   * How long the lock is held without an extend, in ms.
   * @default the lock's ttlMs (30000)
   */
  ttlMs?: number;
}

/**
 * Options of `run` on a lock.
 *
 * @example
 * ```ts
 * await locks.run("order:42", (lease) => charge(order, { signal: lease.signal }), { ttlMs: 10_000, heartbeatMs: 2_000 });
 * ```
 */
export interface LockRunOptions extends LockAcquireOptions, KeepingOptions {}

/**
 * Options of {@link lock}. Every `acquire`/`run` option may be given here as a default.
 *
 * @example
 * ```ts
 * const locks = lock({ client: redis, prefix: "billing", ttlMs: 10_000, waitMs: 500 });
 * ```
 */
export interface LockOptions extends RetryOptions, WaitOptions, KeepingOptions, OwnerOptions {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store. Omitted: the process-wide embedded memory store.
   */
  client?: ClientInput;
  /**
   * Key namespace; the store key of an id is `{<prefix>:lock:<id>}`.
   * @default "lock"
   */
  prefix?: string;
  /**
   * Lock lifetime without renewal, in ms: the crash backstop, and with `run` the renewal window.
   * @default 30000
   */
  ttlMs?: number;
}

/**
 * A distributed mutual-exclusion lock; see {@link lock}.
 *
 * @example
 * ```ts
 * const locks: Lock = lock(redis, { ttlMs: 10_000 });
 * const lease = await locks.acquire("order:42");
 * if (lease) {
 *   try { await charge(order, { signal: lease.signal }); }
 *   finally { await lease.release(); }
 * }
 * ```
 */
export interface Lock {
  /**
   * Takes the lock on `id`, or resolves `null` when someone else holds it
   * (after any retries). Not renewed in the background: call `extend()` if
   * the work can outlive `ttlMs`, and always `release()`. Its `signal`
   * aborts when its end passes without an `extend()`.
   */
  acquire(id: string, options?: LockAcquireOptions): Promise<LockLease | null>;
  /**
   * Runs `fn` holding the lock on `id`, renewing it while `fn` runs and
   * releasing it after. Rejects with `LockNotAcquiredError` when held
   * elsewhere, and with `LockLeaseLostError` when the lock was lost while
   * `fn` ran, even if `fn` resolved.
   */
  run<T>(id: string, fn: (lease: LockLease) => T | PromiseLike<T>, options?: LockRunOptions): Promise<T>;
  /** Whether `id` is held, and for how long yet if not renewed: one store round trip. */
  stats(id: string): Promise<LockStats>;
  /**
   * Lets go of everything this lock holds, for a clean shutdown, as
   * `Semaphore.close` does: later calls and queued waiters are refused with
   * `ShutdownError`, held leases' signals abort with it, and what is still
   * held after `graceMs` is released. Resolves when every lock is back; a
   * second call returns the same promise.
   *
   * @example
   * ```ts
   * await locks.close({ graceMs: 2_000 });
   * ```
   */
  close(options?: CloseOptions): Promise<void>;
  /** Whether the store answers, as this process has seen it, without a round trip (see `Semaphore.health`). */
  health(): Promise<StoreHealth>;
  /**
   * Who holds the lock on `id` now: its token, owner, acquire time and end
   * (a waiter it was handed to included), or `null` when it is free. One
   * store round trip, no writes.
   *
   * @example
   * ```ts
   * const h = await locks.holder("order:42");
   * if (h) log.warn(`order:42 held by ${h.owner} since ${new Date(h.acquiredAt ?? 0).toISOString()}`);
   * ```
   */
  holder(id: string): Promise<Holder | null>;
}
