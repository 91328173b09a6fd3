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
  /** See {@link FreshToken.madeAt}. */
  madeAt?: number | undefined;
  /** See {@link LeaseRecord.recorded}. */
  recorded?: boolean | undefined;
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
  /** See {@link FreshToken.madeAt}. */
  madeAt?: number | undefined;
}

/**
 * A hint an acquire may carry, which a store may ignore (the Redis store does).
 */
export interface FreshToken {
  /**
   * The engine made `token` just now, reading `performance.now()` at
   * `madeAt`, and has sent it nowhere before: it holds nothing and waits
   * nowhere, and carries the call's tenant (a semaphore call's `tenant.name`,
   * or none). A store on the process clock may take the reading as its time
   * and skip looking the token up.
   */
  madeAt?: number | undefined;
}

/**
 * A hint an extend or a release may carry, which a store may ignore: the
 * `record` its acquire answered (when asked with `recorded`) (see {@link "leasehold/store"!AcquireReply.record}),
 * so that it finds the lease without looking the token up. The token still
 * decides: a record that is not that token's live lease is ignored.
 */
export interface LeaseRecord {
  record?: object | undefined;
  /** On an acquire: the caller keeps the record to pass back, so a store may answer one. */
  recorded?: boolean | undefined;
}

/**
 * Push `token`'s lease end to now + `leaseMs`.
 *
 * @example
 * ```ts
 * const ours = await store.lock.extend({ storeKey: "{lock:lock:invoice-42}", token, leaseMs: 10_000 });
 * ```
 */
export interface LockExtendCall extends TokenCall, LeaseRecord {
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
export interface LockReleaseCall extends TokenCall, LeaseRecord {
  heldMs?: number | undefined;
  /** The caller's `performance.now()` reading of just now, which a store on the process clock may take as its time. */
  sentAt?: number | undefined;
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
  /**
   * A waiter of this process, which a store in this process may serve
   * itself: it keeps it queued until `waiter.until` without refreshes and
   * hands it a freed permit from inside the call that freed it, then
   * answers `queued` with `handedOff: true`. A store that answers `queued`
   * without it has not taken it: the engine waits for an announced grant.
   */
  waiter?: InProcessWaiter | undefined;
}

/** A waiter of the process the store lives in (see {@link QueueOptions.waiter}). */
export interface InProcessWaiter {
  /** The lease it holds once granted. */
  readonly leaseMs: number;
  /** When its wait ends, on the store's clock: it stands for the waiter lease. */
  readonly until: number;
  readonly maxQueue: number;
  /**
   * Called (synchronously, from the call that freed the permit) with the
   * grant's time, fence and the store's record of the lease (see
   * {@link LeaseRecord}); it must only resolve a promise.
   */
  onGrant(at: number, fence: number, record?: object): void;
  /** Called when the store closes while it waits; it must only reject a promise. */
  onClose(error: Error): void;
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
