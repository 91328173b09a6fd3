// The one object each store call takes. Optional fields accept `undefined` as well as absence, so
// that the engine can pass what it holds (a lease with no tenant) without building a second object.

/**
 * A call about one id: `storeKey` is the base key the primitive derives from
 * its prefix, its kind and the id (`{prefix:kind:id}`); a store may derive companion keys from
 * it. A lock's and a semaphore's store keys never coincide, so a store may key its state and its
 * grant announcements (`watch`) by `storeKey` alone.
 * (The id alone is what leases and errors call `key`.)
 *
 * @example
 * ```ts
 * const holders = await store.semaphore.count({ storeKey: "{semaphore:semaphore:openai}" });
 * ```
 */
export interface KeyCall {
  storeKey: string;
}

/**
 * A call about one lease or waiter of an id, named by its token.
 *
 * @example
 * ```ts
 * await store.lock.leave({ storeKey: "{lock:lock:invoice-42}", token });
 * ```
 */
export interface TokenCall extends KeyCall {
  token: string;
}

/**
 * Take `weight` permits of at most `limit` for `token`, for `leaseMs`; with
 * `queue`, wait in line instead of being refused; with `tenant`, within the
 * tenant's share too (the tenant itself travels in the token).
 *
 * @example
 * ```ts
 * const reply = await store.semaphore.acquire({ storeKey: "{semaphore:semaphore:openai}", token, limit: 20, weight: 1, leaseMs: 30_000 });
 * ```
 */
export interface SemaphoreAcquireCall extends TokenCall {
  limit: number;
  weight: number;
  leaseMs: number;
  queue?: QueueOptions | undefined;
  tenant?: TenantOptions | undefined;
}

/**
 * Take the lock for `token`, for `leaseMs`; with `queue`, wait in line.
 *
 * @example
 * ```ts
 * const reply = await store.lock.acquire({ storeKey: "{lock:lock:invoice-42}", token, leaseMs: 10_000 });
 * ```
 */
export interface LockAcquireCall extends TokenCall {
  leaseMs: number;
  queue?: QueueOptions | undefined;
}

/**
 * Push `token`'s lease end to now + `leaseMs`.
 *
 * @example
 * ```ts
 * const ours = await store.lock.extend({ storeKey: "{lock:lock:invoice-42}", token, leaseMs: 10_000 });
 * ```
 */
export interface LockExtendCall extends TokenCall {
  leaseMs: number;
}

/**
 * Push `token`'s lease end to now + `leaseMs`. `weight`, when given, is the
 * lease's own (a hint that spares the store a lookup).
 *
 * @example
 * ```ts
 * const ours = await store.semaphore.extend({ storeKey: "{semaphore:semaphore:openai}", token, leaseMs: 30_000, weight: 1 });
 * ```
 */
export interface SemaphoreExtendCall extends LockExtendCall {
  weight?: number | undefined;
}

/**
 * Give back what `token` holds. `heldMs`, when given, is how long the lease
 * was held (whole ms), folded into the id's typical hold.
 *
 * @example
 * ```ts
 * const wasOurs = await store.lock.release({ storeKey: "{lock:lock:invoice-42}", token, heldMs: 120 });
 * ```
 */
export interface LockReleaseCall extends TokenCall {
  heldMs?: number | undefined;
}

/**
 * Give back `token`'s permits. `weight`, when given, is the lease's own (a
 * hint that spares the store a lookup).
 *
 * @example
 * ```ts
 * const wasOurs = await store.semaphore.release({ storeKey: "{semaphore:semaphore:openai}", token, weight: 1, heldMs: 120 });
 * ```
 */
export interface SemaphoreReleaseCall extends LockReleaseCall {
  weight?: number | undefined;
}

/**
 * Figures of a semaphore id, or of one of its tenants.
 *
 * @example
 * ```ts
 * const { used, waiting } = await store.semaphore.stats({ storeKey: "{semaphore:semaphore:openai}", tenant: "acme" });
 * ```
 */
export interface SemaphoreStatsCall extends KeyCall {
  tenant?: string | undefined;
}

/**
 * Keep these waiters' own leases alive for `waiterLeaseMs` more, grant who
 * fits, and say where each stands.
 *
 * @example
 * ```ts
 * const { statuses } = await store.lock.refreshWaiters({ storeKey: "{lock:lock:invoice-42}", tokens: [token], waiterLeaseMs: 5000 });
 * ```
 */
export interface RefreshWaitersCall extends KeyCall {
  tokens: readonly string[];
  waiterLeaseMs: number;
}

/**
 * Listen for the grants made on `storeKey` (by any process).
 *
 * @example
 * ```ts
 * const stop = await store.watch({ storeKey: "{lock:lock:invoice-42}", onGrant: (grant) => console.log(grant.tokens) });
 * stop();
 * ```
 */
export interface WatchCall extends KeyCall {
  onGrant: (grant: Grant) => void;
}

/** How a caller that finds no permit joins the waiting room. */
export interface QueueOptions {
  /**
   * The waiter's own lease: its process must refresh it within this time, or
   * the waiter is dropped (its process died). A permit granted to a waiter
   * stays reserved until its waiter lease ends, unless it is claimed first.
   */
  waiterLeaseMs: number;
  /** The most waiters on one id; 0 for no bound. */
  maxQueue: number;
}

/**
 * A tenant's share of a semaphore id, as one call asks for it: at most
 * `limit` permits held by the tenant at once, and at most `maxQueue` of its
 * callers waiting (0: no bound of its own). The tenant itself travels in the
 * lease token (`<random>@<tenant>`: what follows its first `@`), so that every later
 * call on the lease (extend, release, leave) counts against it without saying so.
 */
export interface TenantOptions {
  limit: number;
  maxQueue: number;
}

/** Waiters just granted permits, their fences, and how long the grants stay reserved if nobody claims them. */
export interface Grant {
  tokens: readonly string[];
  /** The fence of each grant, in the order of `tokens`. */
  fences: readonly number[];
  /** The granted waiters' own lease, as the grant found it: the grant stays reserved this long unless claimed. */
  waiterLeaseMs: number;
}
