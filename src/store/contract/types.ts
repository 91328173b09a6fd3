import type * as calls from "./calls.js";

/**
 * The answer to an acquire attempt. When not acquired, `retryAfterMs` is how
 * long until the nearest current lease ends at the latest (a holder that
 * releases early frees its permit sooner); `queued` says the caller now waits
 * in the id's queue; `queueFull` that the queue was at its `maxQueue`.
 */
export interface AcquireReply {
  acquired: boolean;
  retryAfterMs: number;
  /**
   * When acquired: the grant's fence, a safe integer greater than that of
   * every earlier grant on the key (a re-sent acquire of a semaphore token may
   * get a newer one; a lock's holder keeps its own): what a lease's `fence` says.
   */
  fence?: number;
  queued?: boolean;
  queueFull?: boolean;
  /** Refused because the caller's tenant is at its cap (`retryAfterMs` is then the tenant's own nearest lease end). */
  tenantFull?: boolean;
  /**
   * When not acquired: the id's typical hold time in ms (at least 1), as the
   * releases of every process on the store recorded it (see {@link SemaphoreOperations.release});
   * absent when none was recorded lately.
   */
  holdMs?: number;
  /** Queued as the call's in-process waiter (see {@link "leasehold/store"!QueueOptions.waiter}): the store hands it the permit. */
  handedOff?: boolean;
  /**
   * When acquired, optionally: the store's own record of the lease, for the
   * engine to pass back on extend and release (see {@link "leasehold/store"!LeaseRecord}).
   */
  record?: object;
}

/**
 * A store's answer: a promise, or the value itself when the store has it at
 * once (a store in this process). The engine takes either on one path, and
 * bounds only what it has to wait for.
 */
export type Answer<T> = T | Promise<T>;

/** What a store knows of one semaphore id. */
export interface SemaphoreCounts {
  /** Permits held by live leases (weights included). */
  used: number;
  /** Live leases (a weight-3 lease counts once). */
  holders: number;
  /** Callers waiting in the queue. */
  waiting: number;
  /** Tenants holding or waiting (the id's figures only). */
  tenants?: number;
}

/** The state of one lock id. */
export interface LockStats {
  held: boolean;
  /** Ms until the current lease ends if not renewed; 0 when free. */
  expiresInMs: number;
}

/** One live lease or waiter, as an inspection lists it. */
export interface InspectedEntry {
  token: string;
  /** Permits it holds or waits for (1 for a lock). */
  weight: number;
  /** Ms until its lease (or waiter lease, or a grant's reservation) ends if not renewed. */
  expiresInMs: number;
}

/** Who holds an id and who waits for it, live entries only. */
export interface Inspection {
  /** In no particular order. */
  holders: InspectedEntry[];
  /** In queue order. */
  waiters: InspectedEntry[];
}

/** Where a waiter stands: granted (claim it), still waiting, or gone from the queue. */
export type WaiterStatus = "held" | "waiting" | "gone";

/** What refreshing a process's waiters answers. */
export interface WaiterRefresh {
  /** Per token, in the order given. */
  statuses: WaiterStatus[];
  /**
   * Per token: the fence of a "held" one (a semaphore gives a new one, as to
   * a claim; a lock's holder keeps its own), 0 for the others.
   */
  fences: number[];
  /**
   * Ms until the nearest lease on the id ends (a grant's reservation included):
   * when those still waiting should look again if no grant is announced.
   */
  retryAfterMs: number;
}

/**
 * The calls of a store on semaphore ids. Every call is one atomic step on the
 * store's own clock.
 *
 * @example
 * ```ts
 * const reply = await store.semaphore.acquire({ storeKey: "{semaphore:semaphore:openai}", token, limit: 20, weight: 1, leaseMs: 30_000 });
 * if (reply.acquired) await store.semaphore.release({ storeKey: "{semaphore:semaphore:openai}", token, weight: 1 });
 * ```
 */
export interface SemaphoreOperations {
  /**
   * Prune lapsed holders and waiters, grant waiters that now fit (a waiter fits
   * when the permits held, its own included, are within its own limit and the
   * id's, which is the `limit` of the latest acquire that met or joined the
   * queue), then take `weight` permits for `token` if they fit under `limit`
   * and nobody waits.
   * With `queue`, a caller that finds no permit joins the queue instead of
   * being refused; a waiter calling again refreshes its place or claims its
   * grant. Idempotent per token: a token that already holds is refreshed,
   * never counted twice (and gets a new fence).
   *
   * Every grant (here or to a waiter) carries a fence: greater than every
   * earlier grant's on the key, never reused, while the key is idle too
   * (the Redis store derives it from its clock in microseconds and the last
   * fence its keys keep, and keeps them until its clock has passed it).
   */
  acquire(call: calls.SemaphoreAcquireCall): Answer<AcquireReply>;
  /** Push `token`'s expiry to now + `leaseMs`; false unless it holds a live lease. */
  extend(call: calls.SemaphoreExtendCall): Answer<boolean>;
  /**
   * Return `token`'s permits (and grant waiters they make room for); true only
   * if its lease was still live. A live lease's `heldMs` is folded into the
   * id's typical hold, which refusals answer as `holdMs`:
   * `avg' = round((4 avg + heldMs) / 5)`, or `heldMs` alone when none counts.
   * It counts until a few holds after that release (`now + max(1000, 4 avg')`),
   * never past the end of the released lease, and the id's keys are kept that
   * long. (The engine passes `heldMs` with at most one release per id every 100 ms.)
   */
  release(call: calls.SemaphoreReleaseCall): Answer<boolean>;
  /** Live holders (not permits) of the semaphore. */
  count(call: calls.KeyCall): Promise<number>;
  /**
   * Permits used and holders (live only), and live waiters, of the id or of one
   * of its tenants; for the id, also how many tenants hold or wait. One round trip, no writes.
   */
  stats(call: calls.SemaphoreStatsCall): Promise<SemaphoreCounts>;
  /** Live holders (granted waiters included) and waiters of the semaphore: one round trip, no writes. */
  inspect(call: calls.KeyCall): Promise<Inspection>;
  /** Leave the queue, returning a grant not yet claimed. */
  leave(call: calls.TokenCall): Answer<void>;
  /** Keep these waiters' leases alive, grant who fits, and say where each stands. */
  refreshWaiters(call: calls.RefreshWaitersCall): Answer<WaiterRefresh>;
}

/**
 * The calls of a store on lock ids: a lock is one holder at a time, with the
 * same waiting room, fences and typical hold as a semaphore.
 *
 * @example
 * ```ts
 * const reply = await store.lock.acquire({ storeKey: "{lock:lock:invoice-42}", token, leaseMs: 10_000 });
 * if (reply.acquired) await store.lock.release({ storeKey: "{lock:lock:invoice-42}", token });
 * ```
 */
export interface LockOperations {
  /** Take the lock for `token` if free and nobody waits (or refresh it if `token` holds it); with `queue`, wait in line. */
  acquire(call: calls.LockAcquireCall): Answer<AcquireReply>;
  /** Push the lock's expiry to now + `leaseMs`; false unless `token` holds it. */
  extend(call: calls.LockExtendCall): Answer<boolean>;
  /**
   * Delete the lock (and hand it to the head waiter); true only if `token` held
   * it. `heldMs`: as for a semaphore's release, the lock's typical hold.
   */
  release(call: calls.LockReleaseCall): Answer<boolean>;
  /** Whether the lock is held and for how long yet. */
  stats(call: calls.KeyCall): Promise<LockStats>;
  /** The live holder (a granted waiter included) and the waiters of the lock: one round trip, no writes. */
  inspect(call: calls.KeyCall): Promise<Inspection>;
  /** Leave the lock's queue, returning a grant not yet claimed. */
  leave(call: calls.TokenCall): Answer<void>;
  /** Keep these waiters' leases alive, grant the lock if free, and say where each stands. */
  refreshWaiters(call: calls.RefreshWaitersCall): Answer<WaiterRefresh>;
}

/**
 * Where leases live. `memoryStore()` and `redisStore()` implement it; anything
 * that passes the conformance suite in `test/stores/contract/` may (see "A store
 * of your own" in docs/clients.md). Each call takes one object; `key` is the
 * base key the primitive derives from its prefix, its kind and the id (`{prefix:kind:id}`).
 *
 * The store never decides policy (retries, renewal, loss, how long to wait):
 * that is the engine's job, so both stores share it. It keeps the waiting
 * room's order and grants permits to waiters, in ticket order, as they free.
 *
 * @example
 * ```ts
 * const store: Store = memoryStore();
 * const reply = await store.lock.acquire({ storeKey: "{lock:lock:nightly}", token: "t1", leaseMs: 60_000 });
 * await store.close?.();
 * ```
 */
export interface Store {
  /** `"memory"` or `"redis"`; shown in errors and problem responses. */
  readonly kind: string;
  /**
   * The longest one round trip may take before the engine fails the call
   * with `StoreUnavailableError` (default 2000). The memory store declares 0:
   * it answers in this process and the engine sets no timer for it alone; any
   * other store declaring 0 (a wrapper that inherits it) gets the default.
   */
  readonly timeoutMs?: number;
  /** Default length of a waiter's own lease (see {@link "leasehold/store"!QueueOptions.waiterLeaseMs}). */
  readonly waiterLeaseMs?: number;

  readonly semaphore: SemaphoreOperations;
  readonly lock: LockOperations;

  /**
   * Calls `onGrant` for every grant made on `key` (by any process), so the
   * granted waiters can claim at once. Resolves once listening, with the
   * function that stops. Delivery is best effort: the engine backs it up with timers.
   */
  watch(call: calls.WatchCall): Promise<() => void>;

  /**
   * Ends what the store itself runs (connections it opened, its timers) and
   * refuses every later call with `ShutdownError`, but a release or a leave:
   * those give back (or answer as for nothing held). Never closes a client it
   * was given. Idempotent. Optional for a custom store.
   */
  close?(): Promise<void>;
}
