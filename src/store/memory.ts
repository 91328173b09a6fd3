import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import type { AcquireReply, Grant, LockStats, QueueOptions, SemaphoreFigures, Store, WaiterRefresh } from "./types.js";

interface Holder {
  expiresAt: number;
  weight: number;
}

/** A caller in the waiting room. Map insertion order is ticket order. */
interface Waiter {
  weight: number;
  claimMs: number;
  expiresAt: number;
}

interface SemaphoreState {
  holders: Map<string, Holder>;
  used: number;
  /** Earliest expiry among holders: pruning is skipped until it passes. */
  earliest: number;
  queue: Map<string, Waiter>;
  /** The limit the waiters were queued under, for grants made by a release. */
  limit: number;
  cleanup: NodeJS.Timeout | undefined;
}

interface LockState {
  token: string | undefined;
  expiresAt: number;
  queue: Map<string, Waiter>;
  cleanup: NodeJS.Timeout | undefined;
}

const DEFAULT_WAITER_LEASE_MS = 5000;

/**
 * The embedded store: the same semantics as Redis (lease expiry, pruning,
 * idempotent acquire, token-checked extend and release, a FIFO waiting room
 * with grants) inside one process, on the process's monotonic clock. Idle
 * entries are dropped by `unref()`ed timers, so they neither leak nor keep a
 * process alive. A released entry is not dropped at once but when its timer
 * fires (at the latest expiry it had seen): a busy id that empties between
 * requests would otherwise be rebuilt, with a timer, on every request.
 */
class MemoryStore implements Store {
  readonly kind = "memory";

  constructor(readonly waiterLeaseMs: number) {}
  private readonly semaphores = new Map<string, SemaphoreState>();
  private readonly locks = new Map<string, LockState>();
  private readonly watchers = new Map<string, Set<(grant: Grant) => void>>();

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
  ): Promise<AcquireReply> {
    const now = performance.now();
    const state = this.semaphore(key);
    this.settleSemaphore(key, state, now, limit);
    const held = state.holders.get(token);
    if (held !== undefined) {
      held.expiresAt = now + leaseMs;
      this.scheduleCleanup(key, state);
      return { acquired: true, retryAfterMs: 0 };
    }
    const retryAfterMs = untilMs(state.earliest, now);
    const waiter = state.queue.get(token);
    if (waiter !== undefined) {
      waiter.expiresAt = now + waiter.claimMs;
      state.limit = limit;
      return { acquired: false, queued: true, retryAfterMs };
    }
    // A newcomer never jumps a non-empty queue.
    if (state.queue.size === 0 && state.used + weight <= limit) {
      addHolder(state, token, weight, now + leaseMs);
      this.scheduleCleanup(key, state);
      return { acquired: true, retryAfterMs: 0 };
    }
    const refused = this.joinQueue(state.queue, token, weight, now, queue, retryAfterMs);
    if (refused.queued === true) {
      state.limit = limit;
      this.scheduleCleanup(key, state);
    }
    return refused;
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    const held = state?.holders.get(token);
    if (state === undefined || held === undefined || held.expiresAt <= now) return false;
    held.expiresAt = now + leaseMs;
    // An extend may shorten a lease below the recorded earliest expiry.
    state.earliest = Math.min(state.earliest, held.expiresAt);
    this.scheduleCleanup(key, state);
    return true;
  }

  async semaphoreRelease(key: string, token: string): Promise<boolean> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    const held = state?.holders.get(token);
    if (state === undefined) return false;
    if (held !== undefined) removeHolder(state, token, held);
    this.settleSemaphore(key, state, now, state.limit);
    return held !== undefined && held.expiresAt > now;
  }

  async semaphoreCount(key: string): Promise<number> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    if (state === undefined) return 0;
    let live = 0;
    for (const holder of state.holders.values()) if (holder.expiresAt > now) live++;
    return live;
  }

  async semaphoreStats(key: string): Promise<SemaphoreFigures> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    if (state === undefined) return { used: 0, holders: 0, waiting: 0 };
    let used = 0;
    let holders = 0;
    for (const holder of state.holders.values()) {
      if (holder.expiresAt <= now) continue;
      used += holder.weight;
      holders++;
    }
    let waiting = 0;
    for (const waiter of state.queue.values()) if (waiter.expiresAt > now) waiting++;
    return { used, holders, waiting };
  }

  async lockStats(key: string): Promise<LockStats> {
    const now = performance.now();
    const state = this.locks.get(key);
    if (state?.token === undefined || state.expiresAt <= now) return { held: false, expiresInMs: 0 };
    return { held: true, expiresInMs: Math.ceil(state.expiresAt - now) };
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    const state = this.semaphores.get(key);
    if (state === undefined) return;
    const held = state.holders.get(token);
    if (held !== undefined) removeHolder(state, token, held);
    state.queue.delete(token);
    this.settleSemaphore(key, state, performance.now(), state.limit);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), retryAfterMs: 1 };
    for (const token of tokens) {
      const waiter = state.queue.get(token);
      if (waiter !== undefined) waiter.expiresAt = now + claimMs;
    }
    this.settleSemaphore(key, state, now, state.limit);
    return {
      statuses: tokens.map((token) => (state.holders.has(token) ? "held" : state.queue.has(token) ? "waiting" : "gone")),
      retryAfterMs: untilMs(state.earliest, now),
    };
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    const now = performance.now();
    const state = this.lock(key);
    this.settleLock(key, state, now);
    if (state.token === token) {
      this.holdLock(key, state, token, now + ttlMs);
      return { acquired: true, retryAfterMs: 0 };
    }
    const retryAfterMs = untilMs(state.expiresAt, now);
    const waiter = state.queue.get(token);
    if (waiter !== undefined) {
      waiter.expiresAt = now + waiter.claimMs;
      return { acquired: false, queued: true, retryAfterMs };
    }
    if (state.token === undefined && state.queue.size === 0) {
      this.holdLock(key, state, token, now + ttlMs);
      return { acquired: true, retryAfterMs: 0 };
    }
    const refused = this.joinQueue(state.queue, token, 1, now, queue, retryAfterMs);
    if (refused.queued === true) this.scheduleLockCleanup(key, state);
    return refused;
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const now = performance.now();
    const state = this.locks.get(key);
    if (state === undefined || state.token !== token || state.expiresAt <= now) return false;
    this.holdLock(key, state, token, now + ttlMs);
    return true;
  }

  async lockRelease(key: string, token: string): Promise<boolean> {
    const now = performance.now();
    const state = this.locks.get(key);
    if (state === undefined) return false;
    const ours = state.token === token && state.expiresAt > now;
    if (ours) state.token = undefined;
    this.settleLock(key, state, now);
    return ours;
  }

  async lockLeave(key: string, token: string): Promise<void> {
    const state = this.locks.get(key);
    if (state === undefined) return;
    if (state.token === token) state.token = undefined;
    state.queue.delete(token);
    this.settleLock(key, state, performance.now());
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const now = performance.now();
    const state = this.locks.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), retryAfterMs: 1 };
    for (const token of tokens) {
      const waiter = state.queue.get(token);
      if (waiter !== undefined) waiter.expiresAt = now + claimMs;
    }
    this.settleLock(key, state, now);
    return {
      statuses: tokens.map((token) => (state.token === token ? "held" : state.queue.has(token) ? "waiting" : "gone")),
      retryAfterMs: state.token === undefined ? 1 : untilMs(state.expiresAt, now),
    };
  }

  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    let listeners = this.watchers.get(key);
    if (listeners === undefined) {
      listeners = new Set();
      this.watchers.set(key, listeners);
    }
    listeners.add(onGrant);
    return () => {
      listeners.delete(onGrant);
      if (listeners.size === 0 && this.watchers.get(key) === listeners) this.watchers.delete(key);
    };
  }

  // ---- internals ----

  private semaphore(key: string): SemaphoreState {
    let state = this.semaphores.get(key);
    if (state === undefined) {
      state = { holders: new Map(), used: 0, earliest: Number.POSITIVE_INFINITY, queue: new Map(), limit: 0, cleanup: undefined };
      this.semaphores.set(key, state);
    }
    return state;
  }

  private lock(key: string): LockState {
    let state = this.locks.get(key);
    if (state === undefined) {
      state = { token: undefined, expiresAt: 0, queue: new Map(), cleanup: undefined };
      this.locks.set(key, state);
    }
    return state;
  }

  private joinQueue(
    queue: Map<string, Waiter>,
    token: string,
    weight: number,
    now: number,
    options: QueueOptions | undefined,
    retryAfterMs: number,
  ): AcquireReply {
    if (options === undefined) return { acquired: false, retryAfterMs };
    if (options.maxQueue > 0 && queue.size >= options.maxQueue) return { acquired: false, queueFull: true, retryAfterMs };
    queue.set(token, { weight, claimMs: options.claimMs, expiresAt: now + options.claimMs });
    return { acquired: false, queued: true, retryAfterMs };
  }

  /** Prunes lapsed holders and waiters, then grants waiters from the head while they fit (strict order). */
  private settleSemaphore(key: string, state: SemaphoreState, now: number, limit: number): void {
    prune(state, now);
    if (state.queue.size === 0) return;
    pruneQueue(state.queue, now);
    const granted: string[] = [];
    let reservedMs = Number.POSITIVE_INFINITY;
    for (const [token, waiter] of state.queue) {
      if (state.used + waiter.weight > limit) break;
      state.queue.delete(token);
      // Reserved for the claim window until the waiter's process claims it with a full lease.
      addHolder(state, token, waiter.weight, now + waiter.claimMs);
      granted.push(token);
      reservedMs = Math.min(reservedMs, waiter.claimMs);
    }
    if (granted.length > 0) {
      this.scheduleCleanup(key, state);
      this.announce(key, { tokens: granted, reservedMs });
    }
  }

  private settleLock(key: string, state: LockState, now: number): void {
    if (state.token !== undefined && state.expiresAt <= now) state.token = undefined;
    if (state.queue.size === 0) return;
    pruneQueue(state.queue, now);
    if (state.token !== undefined) return;
    const head = state.queue.entries().next();
    if (head.done === true) return;
    const [token, waiter] = head.value;
    state.queue.delete(token);
    this.holdLock(key, state, token, now + waiter.claimMs);
    this.announce(key, { tokens: [token], reservedMs: waiter.claimMs });
  }

  private holdLock(key: string, state: LockState, token: string, expiresAt: number): void {
    state.token = token;
    state.expiresAt = expiresAt;
    this.scheduleLockCleanup(key, state);
  }

  private announce(key: string, grant: Grant): void {
    const listeners = this.watchers.get(key);
    if (listeners === undefined) return;
    // Never call back into the engine from inside a store call.
    queueMicrotask(() => {
      for (const listener of listeners) listener(grant);
    });
  }

  /** One timer per key, at the latest expiry (holder or waiter): when it fires the key is idle or is rescheduled. */
  private scheduleCleanup(key: string, state: SemaphoreState): void {
    if (state.cleanup !== undefined) return;
    let latest = 0;
    for (const holder of state.holders.values()) latest = Math.max(latest, holder.expiresAt);
    for (const waiter of state.queue.values()) latest = Math.max(latest, waiter.expiresAt);
    state.cleanup = setTimeout(
      () => {
        state.cleanup = undefined;
        this.settleSemaphore(key, state, performance.now(), state.limit);
        if (!this.dropIfIdle(key, state)) this.scheduleCleanup(key, state);
      },
      Math.max(1, Math.ceil(latest - performance.now()) + 1),
    );
    state.cleanup.unref();
  }

  private dropIfIdle(key: string, state: SemaphoreState): boolean {
    if (state.holders.size > 0 || state.queue.size > 0) return false;
    if (state.cleanup !== undefined) clearTimeout(state.cleanup);
    state.cleanup = undefined;
    if (this.semaphores.get(key) === state) this.semaphores.delete(key);
    return true;
  }

  // Timers may fire a little early against performance.now(): a lock is dropped only once really expired.
  private scheduleLockCleanup(key: string, state: LockState): void {
    if (state.cleanup !== undefined) return;
    let latest = state.token === undefined ? 0 : state.expiresAt;
    for (const waiter of state.queue.values()) latest = Math.max(latest, waiter.expiresAt);
    state.cleanup = setTimeout(
      () => {
        state.cleanup = undefined;
        this.settleLock(key, state, performance.now());
        if (!this.dropLockIfIdle(key, state)) this.scheduleLockCleanup(key, state);
      },
      Math.max(1, Math.ceil(latest - performance.now()) + 1),
    );
    state.cleanup.unref();
  }

  private dropLockIfIdle(key: string, state: LockState): boolean {
    if ((state.token !== undefined && state.expiresAt > performance.now()) || state.queue.size > 0) return false;
    if (state.cleanup !== undefined) clearTimeout(state.cleanup);
    state.cleanup = undefined;
    if (this.locks.get(key) === state) this.locks.delete(key);
    return true;
  }
}

/** Whole ms until `at`, at least 1 (and 1 when nothing is due: no holder at all). */
function untilMs(at: number, now: number): number {
  return Number.isFinite(at) ? Math.max(1, Math.ceil(at - now)) : 1;
}

function addHolder(state: SemaphoreState, token: string, weight: number, expiresAt: number): void {
  state.holders.set(token, { expiresAt, weight });
  state.used += weight;
  state.earliest = Math.min(state.earliest, expiresAt);
}

function removeHolder(state: SemaphoreState, token: string, holder: Holder): void {
  state.holders.delete(token);
  state.used -= holder.weight;
  if (state.holders.size === 0) state.earliest = Number.POSITIVE_INFINITY;
}

function prune(state: SemaphoreState, now: number): void {
  if (state.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  for (const [token, holder] of state.holders) {
    if (holder.expiresAt <= now) removeHolder(state, token, holder);
    else earliest = Math.min(earliest, holder.expiresAt);
  }
  state.earliest = earliest;
}

/** Waiters whose process stopped refreshing them leave the queue. */
function pruneQueue(queue: Map<string, Waiter>, now: number): void {
  for (const [token, waiter] of queue) if (waiter.expiresAt <= now) queue.delete(token);
}

/**
 * An in-process store with the same semantics as Redis, for one process,
 * tests and local development. Without a `client`, every primitive shares one
 * process-wide instance of it; create your own to isolate.
 *
 * @example
 * ```ts
 * import { memoryStore, semaphore } from "leasehold";
 * const slots = semaphore({ client: memoryStore(), limit: 4 });
 * ```
 */
export function memoryStore(options: MemoryStoreOptions = {}): Store {
  const given = optionsObject(options, "memoryStore");
  knownOptions(given, ["waiterLeaseMs"], "memoryStore");
  return new MemoryStore(
    given.waiterLeaseMs === undefined
      ? DEFAULT_WAITER_LEASE_MS
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without being refreshed, e.g. 5000.",
        ),
  );
}

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /**
   * How long a waiter stays queued without its waiting call refreshing it
   * (refreshed every third of it), and how long a granted permit is reserved
   * for its waiter to claim.
   * @default 5000
   */
  waiterLeaseMs?: number;
}

/** True for the embedded store (not for wrappers around it). */
export function isMemoryStore(store: Store): boolean {
  return store instanceof MemoryStore;
}

let shared: Store | undefined;

/** The process-wide store used when no `client` is given. */
export function defaultStore(): Store {
  shared ??= memoryStore();
  return shared;
}
