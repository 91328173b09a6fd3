import { STORE_TIMEOUT_MS } from "../defaults.js";
import { MAX_MS } from "../validate.js";

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
   * releases of every process on the store recorded it (see `semaphoreRelease`);
   * absent when none was recorded lately.
   */
  holdMs?: number;
}

/** How a caller that finds no permit joins the waiting room. */
export interface QueueOptions {
  /**
   * The waiter's own lease: its process must refresh it within this time, or
   * the waiter is dropped (its process died). A permit granted to a waiter
   * stays reserved until its waiter lease ends, unless it is claimed first.
   */
  claimMs: number;
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

/** The tenant a lease token belongs to: what follows its first `@` (tokens are base64url: none of their own). "" for none. */
export function tenantOf(token: string): string {
  const at = token.indexOf("@");
  return at < 0 ? "" : token.slice(at + 1);
}

/** Waiters just granted permits, their fences, and how long the grants stay reserved if nobody claims them. */
export interface Grant {
  tokens: readonly string[];
  /** The fence of each grant, in the order of `tokens`. */
  fences: readonly number[];
  reservedMs: number;
}

/** What a store knows of one semaphore id. */
export interface SemaphoreFigures {
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
 * Where leases live. `memoryStore()` and `redisStore()` implement it; anything
 * that passes the conformance suite in `test/conformance/` may. Every method
 * is one atomic step on the store's own clock. `key` is the base key the
 * primitive derives from its prefix and id (`{prefix:id}`); a store may derive
 * companion keys from it.
 *
 * The store never decides policy (retries, renewal, loss, how long to wait):
 * that is the engine's job, so both stores share it. It keeps the waiting
 * room's order and grants permits to waiters, in ticket order, as they free.
 */
export interface Store {
  /** `"memory"` or `"redis"`; shown in errors and problem responses. */
  readonly kind: string;
  /** Default length of a waiter's own lease (see {@link QueueOptions.claimMs}). */
  readonly waiterLeaseMs?: number;

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
  semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply>;
  /**
   * Push `token`'s expiry to now + `leaseMs`; false unless it holds a live lease.
   * `weight`, when given, is the lease's own (a hint, as for release).
   */
  semaphoreExtend(key: string, token: string, leaseMs: number, weight?: number): Promise<boolean>;
  /**
   * Return `token`'s permits (and grant waiters they make room for); true only
   * if its lease was still live. `weight`, when given, is the lease's own (a
   * hint that spares a lookup). `heldMs`, when given, is how long the lease
   * was held (whole ms): a live lease's is folded into the id's typical hold,
   * which refusals answer as `holdMs`: `avg' = round((4 avg + heldMs) / 5)`,
   * or `heldMs` alone when none counts. It counts until a few holds after
   * that release (`now + max(1000, 4 avg')`), never past the end of the
   * released lease, and the id's keys are kept that long. (The engine passes
   * `heldMs` with at most one release per id every 100 ms.)
   */
  semaphoreRelease(key: string, token: string, weight?: number, heldMs?: number): Promise<boolean>;
  /** Live holders (not permits) of the semaphore. */
  semaphoreCount(key: string): Promise<number>;
  /**
   * Permits used and holders (live only), and live waiters, of the id or of one
   * of its tenants; for the id, also how many tenants hold or wait. One round trip, no writes.
   */
  semaphoreStats(key: string, tenant?: string): Promise<SemaphoreFigures>;
  /** Live holders (granted waiters included) and waiters of the semaphore: one round trip, no writes. */
  semaphoreInspect(key: string): Promise<Inspection>;
  /** Leave the queue, returning a grant not yet claimed. */
  semaphoreLeave(key: string, token: string): Promise<void>;
  /** Keep these waiters' leases alive, grant who fits, and say where each stands. */
  semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh>;

  /** Take the lock for `token` if free and nobody waits (or refresh it if `token` holds it); with `queue`, wait in line. */
  lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply>;
  /** Push the lock's expiry to now + `ttlMs`; false unless `token` holds it. */
  lockExtend(key: string, token: string, ttlMs: number): Promise<boolean>;
  /**
   * Delete the lock (and hand it to the head waiter); true only if `token` held
   * it. `heldMs`: as for `semaphoreRelease`, the lock's typical hold.
   */
  lockRelease(key: string, token: string, heldMs?: number): Promise<boolean>;
  /** Whether the lock is held and for how long yet. */
  lockStats(key: string): Promise<LockStats>;
  /** The live holder (a granted waiter included) and the waiters of the lock: one round trip, no writes. */
  lockInspect(key: string): Promise<Inspection>;
  /** Leave the lock's queue, returning a grant not yet claimed. */
  lockLeave(key: string, token: string): Promise<void>;
  /** Keep these waiters' leases alive, grant the lock if free, and say where each stands. */
  lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh>;

  /**
   * Calls `onGrant` for every grant made on `key` (by any process), so the
   * granted waiters can claim at once. Resolves once listening. Delivery is
   * best effort: the engine backs it up with timers.
   */
  watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void>;

  /**
   * Ends what the store itself runs (connections it opened, its timers) and
   * refuses every later call with `ShutdownError`. Never closes a client it
   * was given. Optional for a custom store.
   */
  close?(): Promise<void>;
}

/** Tells a store apart from a Redis client, a promise or a factory. */
export function isStore(value: unknown): value is Store {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Store).semaphoreAcquire === "function" &&
    typeof (value as Store).lockAcquire === "function"
  );
}

/** The bound on one round trip for a store that names none (a custom store). */

/**
 * A duration a store declares about itself, or `fallback` when it declares
 * none or one a timer cannot hold (a custom store's `Infinity` or `"5s"`
 * would make every timer built on it fire at once).
 */
export function declaredMs(store: Store, property: "timeoutMs" | "waiterLeaseMs", fallback: number): number {
  const own = (store as { timeoutMs?: unknown; waiterLeaseMs?: unknown })[property];
  return typeof own === "number" && own >= 1 && own <= MAX_MS ? own : fallback;
}

/** The longest one round trip to `store` may take: what it declares, else 2 s (the breaker's probe and every call alike). */
export function declaredTimeoutMs(store: Store): number {
  return declaredMs(store, "timeoutMs", STORE_TIMEOUT_MS);
}
