import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  Store,
  WaiterRefresh,
} from "./types.js";

/**
 * Where the embedded store reads the time and sets its clean-up timers: the
 * process's monotonic clock by default; the model-based suite passes a clock
 * it advances itself, so that a failing case replays exactly.
 */
export interface MemoryClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const processClock: MemoryClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface Holder {
  expiresAt: number;
  weight: number;
}

/** A caller in the waiting room. Map insertion order is ticket order. */
interface Waiter {
  weight: number;
  /** The limit its call passed: it is granted only within it. */
  limit: number;
  /**
   * Its waiter lease; a grant reserves its permits until then. A waiter of
   * this process (`onGrant`) has none to refresh: it stays until its wait ends.
   */
  expiresAt: number;
  /** A waiter of this process: granted, it holds a full lease at once and is told here. */
  local?: LocalWaiter;
}

/** A waiter of the process the store lives in: a freed permit goes straight to it. */
export interface LocalWaiter {
  leaseMs: number;
  /** Called (synchronously, from the call that freed the permit) with the grant's time; it must only resolve a promise. */
  onGrant(at: number): void;
}

interface SemaphoreState {
  holders: Map<string, Holder>;
  /** Permits of every holder present, lapsed or not (as `ZCARD + ~extra` in Redis). */
  used: number;
  /** At most the earliest expiry among holders present: pruning is skipped until it passes. */
  earliest: number;
  queue: Queue;
  /** The id's limit as the store knows it: that of the latest acquire that met or joined the queue. */
  idLimit: number;
  cleanup: unknown;
}

interface LockState {
  token: string | undefined;
  expiresAt: number;
  queue: Queue;
  cleanup: unknown;
}

/** Waiters in ticket order, and at most the earliest waiter lease end among them: pruning waits until it passes. */
interface Queue {
  waiters: Map<string, Waiter>;
  earliest: number;
}

const newQueue = (): Queue => ({ waiters: new Map(), earliest: Number.POSITIVE_INFINITY });

const DEFAULT_WAITER_LEASE_MS = 5000;

// ---- holders (lua/lib/holders.lua) ----

function holdersAdd(state: SemaphoreState, token: string, weight: number, expiresAt: number): void {
  state.holders.set(token, { expiresAt, weight });
  state.used += weight;
  state.earliest = Math.min(state.earliest, expiresAt);
}

function holdersRemove(state: SemaphoreState, token: string): Holder | undefined {
  const holder = state.holders.get(token);
  if (holder === undefined) return undefined;
  state.holders.delete(token);
  state.used -= holder.weight;
  if (state.holders.size === 0) state.earliest = Number.POSITIVE_INFINITY;
  return holder;
}

/** Lapsed leases are reclaimed here rather than by a sweeper. */
function holdersPrune(state: SemaphoreState, now: number): void {
  if (state.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  for (const [token, holder] of state.holders) {
    if (holder.expiresAt <= now) holdersRemove(state, token);
    else earliest = Math.min(earliest, holder.expiresAt);
  }
  state.earliest = earliest;
}

/** Ms until the nearest live lease ends (a reservation included): when a permit frees at the latest. */
function holdersNext(state: SemaphoreState, now: number): number {
  let nearest = Number.POSITIVE_INFINITY;
  for (const holder of state.holders.values()) if (holder.expiresAt > now) nearest = Math.min(nearest, holder.expiresAt);
  return untilMs(nearest, now);
}

// ---- queue (lua/lib/queue.lua) ----

/** Waiters whose process stopped refreshing them (or whose wait ended) leave the queue. */
function queuePrune(queue: Queue, now: number): void {
  if (queue.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  for (const [token, waiter] of queue.waiters) {
    if (waiter.expiresAt <= now) queue.waiters.delete(token);
    else earliest = Math.min(earliest, waiter.expiresAt);
  }
  queue.earliest = earliest;
}

/** Moves a waiter's lease end (a shorter claim window can bring it forward: pruning must see that). */
function queueTouch(queue: Queue, waiter: Waiter, expiresAt: number): void {
  if (waiter.local !== undefined) return;
  waiter.expiresAt = expiresAt;
  queue.earliest = Math.min(queue.earliest, expiresAt);
}

function queueRefresh(queue: Queue, tokens: readonly string[], claimMs: number, now: number): void {
  for (const token of tokens) {
    const waiter = queue.waiters.get(token);
    if (waiter !== undefined) queueTouch(queue, waiter, now + claimMs);
  }
}

function queueAdd(queue: Queue, token: string, waiter: Waiter): void {
  queue.waiters.set(token, waiter);
  queue.earliest = Math.min(queue.earliest, waiter.expiresAt);
}

/** Joins the queue, refuses, or says the queue is full (lua/semaphore-acquire.lua's tail). */
function queueJoin(
  queue: Queue,
  token: string,
  weight: number,
  limit: number,
  now: number,
  options: QueueOptions | undefined,
  retryAfterMs: number,
): AcquireReply {
  if (options === undefined) return { acquired: false, retryAfterMs };
  if (options.maxQueue > 0 && queue.waiters.size >= options.maxQueue) return { acquired: false, queueFull: true, retryAfterMs };
  queueAdd(queue, token, { weight, limit, expiresAt: now + options.claimMs });
  return { acquired: false, queued: true, retryAfterMs };
}

/** What a local wait joins with: the wait's end stands for the waiter lease. */
interface LocalJoin extends LocalWaiter {
  until: number;
  maxQueue: number;
}

/** Whole ms until `at`, at least 1 (and 1 when nothing is due). */
function untilMs(at: number, now: number): number {
  return Number.isFinite(at) ? Math.max(1, Math.ceil(at - now)) : 1;
}

/**
 * What the embedded store offers the engine beyond the {@link Store}
 * contract: answers at once, without a promise, and a queue that hands a
 * freed permit straight to a waiter of this process (no grant to announce and
 * claim: the waiter is alive, it is in this process). `kind` picks the
 * primitive; a lock ignores `limit` and `weight`.
 */
export interface LocalStore extends Store {
  takeNow(kind: Kind, key: string, token: string, limit: number, weight: number, leaseMs: number): AcquireReply;
  /** Takes at once, or queues as a waiter of this process until `join.until` (then `onGrant`), or refuses / is full. */
  waitNow(kind: Kind, key: string, token: string, limit: number, weight: number, join: LocalJoin): AcquireReply;
  leaveNow(kind: Kind, key: string, token: string): void;
  extendNow(kind: Kind, key: string, token: string, leaseMs: number): boolean;
  releaseNow(kind: Kind, key: string, token: string): boolean;
}

type Kind = "semaphore" | "lock";

/**
 * The embedded store: the same semantics as Redis (lease expiry, pruning,
 * idempotent acquire, token-checked extend and release, a FIFO waiting room
 * with grants) inside one process, on the process's monotonic clock. Its
 * functions are named after the Lua they mirror (`lua/lib/`), so the two can
 * be read side by side. Idle entries are dropped by timers that neither leak
 * nor keep a process alive, at the latest expiry they hold, as Redis expires
 * keys; a released entry is not dropped at once: a busy id that empties
 * between requests would otherwise be rebuilt, with a timer, on every request.
 * The Store methods are the synchronous cores wrapped in a promise.
 */
class MemoryStore implements LocalStore {
  readonly kind = "memory";
  readonly #semaphores = new Map<string, SemaphoreState>();
  readonly #locks = new Map<string, LockState>();
  readonly #watchers = new Map<string, Set<(grant: Grant) => void>>();

  constructor(
    readonly waiterLeaseMs: number,
    readonly clock: MemoryClock,
  ) {}

  // ---- the Store contract ----

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
  ): Promise<AcquireReply> {
    return this.#semaphoreAcquire(key, token, limit, weight, leaseMs, queue, undefined);
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return this.extendNow("semaphore", key, token, leaseMs);
  }

  async semaphoreRelease(key: string, token: string): Promise<boolean> {
    return this.releaseNow("semaphore", key, token);
  }

  async semaphoreCount(key: string): Promise<number> {
    return (await this.semaphoreStats(key)).holders;
  }

  async semaphoreStats(key: string): Promise<SemaphoreFigures> {
    const now = this.clock.now();
    const state = this.#semaphores.get(key);
    if (state === undefined) return { used: 0, holders: 0, waiting: 0 };
    let used = 0;
    let holders = 0;
    for (const holder of state.holders.values()) {
      if (holder.expiresAt <= now) continue;
      used += holder.weight;
      holders++;
    }
    let waiting = 0;
    for (const waiter of state.queue.waiters.values()) if (waiter.expiresAt > now) waiting++;
    return { used, holders, waiting };
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    const now = this.clock.now();
    const state = this.#semaphores.get(key);
    if (state === undefined) return { holders: [], waiters: [] };
    return {
      holders: [...state.holders]
        .filter(([, holder]) => holder.expiresAt > now)
        .map(([token, holder]) => ({ token, weight: holder.weight, expiresInMs: Math.ceil(holder.expiresAt - now) })),
      waiters: inspectQueue(state.queue, now),
    };
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    this.leaveNow("semaphore", key, token);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const now = this.clock.now();
    const state = this.#semaphores.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), retryAfterMs: 1 };
    // A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
    holdersPrune(state, now);
    queuePrune(state.queue, now);
    queueRefresh(state.queue, tokens, claimMs, now);
    this.#grantSemaphore(key, state, now);
    this.#expireSemaphore(key, state);
    return {
      statuses: tokens.map((token) => (state.holders.has(token) ? "held" : state.queue.waiters.has(token) ? "waiting" : "gone")),
      retryAfterMs: holdersNext(state, now),
    };
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    return this.#lockAcquire(key, token, ttlMs, queue, undefined);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    return this.extendNow("lock", key, token, ttlMs);
  }

  async lockRelease(key: string, token: string): Promise<boolean> {
    return this.releaseNow("lock", key, token);
  }

  async lockStats(key: string): Promise<LockStats> {
    const now = this.clock.now();
    const state = this.#locks.get(key);
    if (state?.token === undefined || state.expiresAt <= now) return { held: false, expiresInMs: 0 };
    return { held: true, expiresInMs: Math.ceil(state.expiresAt - now) };
  }

  async lockInspect(key: string): Promise<Inspection> {
    const now = this.clock.now();
    const state = this.#locks.get(key);
    if (state === undefined) return { holders: [], waiters: [] };
    const held = state.token !== undefined && state.expiresAt > now;
    return {
      holders: held ? [{ token: state.token as string, weight: 1, expiresInMs: Math.ceil(state.expiresAt - now) }] : [],
      waiters: inspectQueue(state.queue, now),
    };
  }

  async lockLeave(key: string, token: string): Promise<void> {
    this.leaveNow("lock", key, token);
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const now = this.clock.now();
    const state = this.#locks.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), retryAfterMs: 1 };
    queuePrune(state.queue, now);
    queueRefresh(state.queue, tokens, claimMs, now);
    this.#settleLock(key, state, now);
    this.#expireLock(key, state);
    return {
      statuses: tokens.map((token) => (state.token === token ? "held" : state.queue.waiters.has(token) ? "waiting" : "gone")),
      retryAfterMs: lockNext(state, now),
    };
  }

  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    let listeners = this.#watchers.get(key);
    if (listeners === undefined) {
      listeners = new Set();
      this.#watchers.set(key, listeners);
    }
    listeners.add(onGrant);
    return () => {
      listeners.delete(onGrant);
      if (listeners.size === 0 && this.#watchers.get(key) === listeners) this.#watchers.delete(key);
    };
  }

  // ---- what the engine calls on the embedded store: at once ----

  takeNow(kind: Kind, key: string, token: string, limit: number, weight: number, leaseMs: number): AcquireReply {
    return kind === "semaphore"
      ? this.#semaphoreAcquire(key, token, limit, weight, leaseMs, undefined, undefined)
      : this.#lockAcquire(key, token, leaseMs, undefined, undefined);
  }

  waitNow(kind: Kind, key: string, token: string, limit: number, weight: number, join: LocalJoin): AcquireReply {
    return kind === "semaphore"
      ? this.#semaphoreAcquire(key, token, limit, weight, join.leaseMs, undefined, join)
      : this.#lockAcquire(key, token, join.leaseMs, undefined, join);
  }

  leaveNow(kind: Kind, key: string, token: string): void {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined) return;
      if (state.token === token) state.token = undefined;
      state.queue.waiters.delete(token);
      this.#settleLock(key, state, now);
      return;
    }
    const state = this.#semaphores.get(key);
    if (state === undefined) return;
    holdersRemove(state, token);
    state.queue.waiters.delete(token);
    holdersPrune(state, now);
    queuePrune(state.queue, now);
    this.#grantSemaphore(key, state, now);
  }

  extendNow(kind: Kind, key: string, token: string, leaseMs: number): boolean {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined || state.token !== token || state.expiresAt <= now) return false;
      state.expiresAt = now + leaseMs;
      this.#expireLock(key, state);
      return true;
    }
    const state = this.#semaphores.get(key);
    const held = state?.holders.get(token);
    if (state === undefined || held === undefined || held.expiresAt <= now) return false;
    held.expiresAt = now + leaseMs;
    // An extend may shorten a lease below the recorded earliest expiry.
    state.earliest = Math.min(state.earliest, held.expiresAt);
    this.#expireSemaphore(key, state);
    return true;
  }

  releaseNow(kind: Kind, key: string, token: string): boolean {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined) return false;
      const ours = state.token === token && state.expiresAt > now;
      if (state.token === token) state.token = undefined;
      this.#settleLock(key, state, now);
      return ours;
    }
    const state = this.#semaphores.get(key);
    if (state === undefined) return false;
    const held = holdersRemove(state, token);
    holdersPrune(state, now);
    if (state.queue.waiters.size > 0) {
      queuePrune(state.queue, now);
      this.#grantSemaphore(key, state, now);
    }
    return held !== undefined && held.expiresAt > now;
  }

  /** The ids this store keeps state for, and whether each has its clean-up timer: for the model-based suite. */
  debugIds(): { semaphores: [string, boolean][]; locks: [string, boolean][] } {
    const ids = (map: Map<string, { cleanup: unknown }>): [string, boolean][] =>
      [...map].map(([key, state]) => [key, state.cleanup !== undefined]);
    return { semaphores: ids(this.#semaphores), locks: ids(this.#locks) };
  }

  // ---- the acquire steps (lua/semaphore-acquire.lua, lua/lock-acquire.lua) ----

  #semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue: QueueOptions | undefined,
    local: LocalJoin | undefined,
  ): AcquireReply {
    const now = this.clock.now();
    const state = this.#semaphore(key);
    holdersPrune(state, now);
    if (state.queue.waiters.size > 0) {
      queuePrune(state.queue, now);
      // This caller's limit is now the id's limit as the store knows it, for the grants below.
      state.idLimit = limit;
      this.#grantSemaphore(key, state, now);
    }
    let reply: AcquireReply;
    const held = state.holders.get(token);
    const waiter = state.queue.waiters.get(token);
    if (held !== undefined) {
      // A re-sent acquire, or a waiter claiming its grant: refresh, never count twice.
      held.expiresAt = now + leaseMs;
      state.earliest = Math.min(state.earliest, held.expiresAt);
      reply = { acquired: true, retryAfterMs: 0 };
    } else if (waiter !== undefined) {
      queueTouch(state.queue, waiter, now + (queue?.claimMs ?? 0));
      reply = { acquired: false, queued: true, retryAfterMs: holdersNext(state, now) };
    } else if (state.queue.waiters.size === 0 && state.used + weight <= limit) {
      // A newcomer never jumps a non-empty queue.
      holdersAdd(state, token, weight, now + leaseMs);
      reply = { acquired: true, retryAfterMs: 0 };
    } else if (local !== undefined) {
      reply = this.#joinLocally(state.queue, token, weight, limit, local, holdersNext(state, now));
      if (reply.queued === true) state.idLimit = limit;
    } else {
      reply = queueJoin(state.queue, token, weight, limit, now, queue, holdersNext(state, now));
      if (reply.queued === true) state.idLimit = limit;
    }
    this.#expireSemaphore(key, state);
    return reply;
  }

  #lockAcquire(
    key: string,
    token: string,
    ttlMs: number,
    queue: QueueOptions | undefined,
    local: LocalJoin | undefined,
  ): AcquireReply {
    const now = this.clock.now();
    const state = this.#lock(key);
    this.#settleLock(key, state, now);
    let reply: AcquireReply;
    const waiter = state.queue.waiters.get(token);
    if (state.token === token) {
      // A re-sent acquire, or a waiter claiming its grant.
      state.expiresAt = now + ttlMs;
      reply = { acquired: true, retryAfterMs: 0 };
    } else if (waiter !== undefined) {
      queueTouch(state.queue, waiter, now + (queue?.claimMs ?? 0));
      reply = { acquired: false, queued: true, retryAfterMs: lockNext(state, now) };
    } else if (state.token === undefined && state.queue.waiters.size === 0) {
      state.token = token;
      state.expiresAt = now + ttlMs;
      reply = { acquired: true, retryAfterMs: 0 };
    } else if (local !== undefined) {
      reply = this.#joinLocally(state.queue, token, 1, 1, local, lockNext(state, now));
    } else {
      reply = queueJoin(state.queue, token, 1, 1, now, queue, lockNext(state, now));
    }
    this.#expireLock(key, state);
    return reply;
  }

  #joinLocally(queue: Queue, token: string, weight: number, limit: number, join: LocalJoin, retryAfterMs: number): AcquireReply {
    if (join.maxQueue > 0 && queue.waiters.size >= join.maxQueue) return { acquired: false, queueFull: true, retryAfterMs };
    queueAdd(queue, token, { weight, limit, expiresAt: join.until, local: { leaseMs: join.leaseMs, onGrant: join.onGrant } });
    return { acquired: false, queued: true, retryAfterMs };
  }

  // ---- per-id state ----

  #semaphore(key: string): SemaphoreState {
    let state = this.#semaphores.get(key);
    if (state === undefined) {
      state = {
        holders: new Map(),
        used: 0,
        earliest: Number.POSITIVE_INFINITY,
        queue: newQueue(),
        idLimit: 0,
        cleanup: undefined,
      };
      this.#semaphores.set(key, state);
    }
    return state;
  }

  #lock(key: string): LockState {
    let state = this.#locks.get(key);
    if (state === undefined) {
      state = { token: undefined, expiresAt: 0, queue: newQueue(), cleanup: undefined };
      this.#locks.set(key, state);
    }
    return state;
  }

  /**
   * Admits waiters from the head, in ticket order, while the permits held, theirs
   * included, fit within both their own limit and the id's (lua/lib/grant.lua).
   * A grant reserves the permits until the waiter's own lease ends; a waiter of
   * this process gets its full lease at once and is told directly.
   */
  #grantSemaphore(key: string, state: SemaphoreState, now: number): void {
    let granted: string[] | undefined;
    let told: LocalWaiter[] | undefined;
    let reservedMs = Number.POSITIVE_INFINITY;
    for (const [token, waiter] of state.queue.waiters) {
      if (state.used + waiter.weight > Math.min(waiter.limit, state.idLimit)) break;
      state.queue.waiters.delete(token);
      if (waiter.local !== undefined) {
        holdersAdd(state, token, waiter.weight, now + waiter.local.leaseMs);
        told ??= [];
        told.push(waiter.local);
        continue;
      }
      holdersAdd(state, token, waiter.weight, waiter.expiresAt);
      granted ??= [];
      granted.push(token);
      reservedMs = Math.min(reservedMs, waiter.expiresAt - now);
    }
    if (granted === undefined && told === undefined) return;
    this.#expireSemaphore(key, state);
    if (granted !== undefined) this.#announce(key, { tokens: granted, reservedMs: Math.max(1, Math.ceil(reservedMs)) });
    if (told !== undefined) for (const local of told) local.onGrant(now);
  }

  /** Drops a lapsed holder and lapsed waiters, then hands a free lock to the head waiter (lua/lib/settle-lock.lua). */
  #settleLock(key: string, state: LockState, now: number): void {
    if (state.token !== undefined && state.expiresAt <= now) state.token = undefined;
    if (state.queue.waiters.size === 0) return;
    queuePrune(state.queue, now);
    if (state.token !== undefined) return;
    const head = state.queue.waiters.entries().next();
    if (head.done === true) return;
    const [token, waiter] = head.value;
    state.queue.waiters.delete(token);
    state.token = token;
    state.expiresAt = waiter.local === undefined ? waiter.expiresAt : now + waiter.local.leaseMs;
    this.#expireLock(key, state);
    if (waiter.local !== undefined) waiter.local.onGrant(now);
    else this.#announce(key, { tokens: [token], reservedMs: Math.max(1, Math.ceil(waiter.expiresAt - now)) });
  }

  #announce(key: string, grant: Grant): void {
    const listeners = this.#watchers.get(key);
    if (listeners === undefined) return;
    // Never call back into the engine from inside a store call.
    queueMicrotask(() => {
      for (const listener of listeners) listener(grant);
    });
  }

  // ---- expiry: the state of an id vanishes with the last thing it holds, as Redis keys do ----

  #expireSemaphore(key: string, state: SemaphoreState): void {
    if (state.cleanup !== undefined) return;
    this.#expire(state, () => {
      const now = this.clock.now();
      holdersPrune(state, now);
      queuePrune(state.queue, now);
      if (state.holders.size > 0 || state.queue.waiters.size > 0) {
        return latestOf(state.holders.values(), state.queue.waiters.values());
      }
      if (this.#semaphores.get(key) === state) this.#semaphores.delete(key);
      return undefined;
    });
  }

  #expireLock(key: string, state: LockState): void {
    if (state.cleanup !== undefined) return;
    const latest = (): number => latestOf(state.token === undefined ? [] : [state], state.queue.waiters.values());
    this.#expire(state, () => {
      const now = this.clock.now();
      if (state.token !== undefined && state.expiresAt <= now) state.token = undefined;
      queuePrune(state.queue, now);
      if (state.token !== undefined || state.queue.waiters.size > 0) return latest();
      if (this.#locks.get(key) === state) this.#locks.delete(key);
      return undefined;
    });
  }

  /**
   * One timer per id, at the latest expiry it holds (`sweep` names it, and
   * drops the id once idle). Armed on the id's first use, it fires, finds
   * the id busy, and re-arms at the latest expiry then; a timer may also
   * fire early against the clock and simply re-arm.
   */
  #expire(state: { cleanup: unknown }, sweep: () => number | undefined): void {
    const arm = (at: number): void => {
      state.cleanup = this.clock.setTimeout(
        () => {
          state.cleanup = undefined;
          const next = sweep();
          if (next !== undefined) arm(next);
        },
        Math.max(1, Math.ceil(at - this.clock.now()) + 1),
      );
    };
    const next = sweep();
    if (next !== undefined) arm(next);
  }
}

function lockNext(state: LockState, now: number): number {
  return state.token === undefined ? 1 : untilMs(state.expiresAt, now);
}

function latestOf(...groups: Iterable<{ expiresAt: number }>[]): number {
  let latest = 0;
  for (const group of groups) for (const entry of group) latest = Math.max(latest, entry.expiresAt);
  return latest;
}

function inspectQueue(queue: Queue, now: number): Inspection["waiters"] {
  return [...queue.waiters]
    .filter(([, waiter]) => waiter.expiresAt > now)
    .map(([token, waiter]) => ({ token, weight: waiter.weight, expiresInMs: Math.ceil(waiter.expiresAt - now) }));
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
  return createMemoryStore(options, processClock);
}

/** {@link memoryStore} on a given clock: the model-based suite passes one it advances itself. */
export function createMemoryStore(
  options: MemoryStoreOptions,
  clock: MemoryClock,
): Store & { debugIds: MemoryStore["debugIds"] } {
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
    clock,
  );
}

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /**
   * How long a waiter stays queued without its waiting call refreshing it
   * (refreshed every third of it); a permit granted to a waiter stays
   * reserved until then, unless claimed first.
   * @default 5000
   */
  waiterLeaseMs?: number;
}

/** True for the embedded store (not for wrappers around it): the engine may call it at once. */
export function isMemoryStore(store: Store): store is LocalStore {
  return store instanceof MemoryStore;
}

let shared: Store | undefined;

/** The process-wide store used when no `client` is given. */
export function defaultStore(): Store {
  shared ??= memoryStore();
  return shared;
}
