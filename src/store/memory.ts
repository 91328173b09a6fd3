import { WAITER_LEASE_MS } from "../defaults.js";
import { ShutdownError } from "../errors.js";
import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import { foldHold, type HoldRecord, holdKeptUntil, holdMsOf } from "./hold.js";
import { Turns } from "./turns.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  Store,
  TenantOptions,
  WaiterRefresh,
  WaiterStatus,
} from "./types.js";
import { tenantOf } from "./types.js";

/**
 * Where the embedded store reads the time and sets its clean-up timers: the
 * process's monotonic clock by default; the model-based suite passes a clock
 * it advances itself, so that a failing case replays exactly.
 */
export interface MemoryClock {
  now(): number;
  /**
   * Where fences start: a clock in whole microseconds that never goes back
   * within the process (see `fence` in the Store contract).
   */
  micros(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const processClock: MemoryClock = {
  now: () => performance.now(),
  // Wall time at the process's start plus monotonic time since: it never goes back within the
  // process, and a restarted process starts past every fence its predecessor gave (as Redis's TIME).
  micros: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

interface Holder {
  expiresAt: number;
  weight: number;
  tenant: string;
}

/** A caller in the waiting room. */
interface Waiter {
  tenant: string;
  weight: number;
  /** The limit its call passed: it is granted only within it. */
  limit: number;
  /** Its tenant's cap as its call passed it (Infinity: none). */
  tenantLimit: number;
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
  /** Called (synchronously, from the call that freed the permit) with the grant's time and fence; it must only resolve a promise. */
  onGrant(at: number, fence: number): void;
}

interface SemaphoreState {
  key: string;
  holders: Map<string, Holder>;
  /** Permits of every holder present, lapsed or not (as the members of the holders set in Redis). */
  used: number;
  /** The same, per tenant (the `:t` index in Redis); a tenant with none is not kept. */
  tenantUsed: Map<string, number>;
  /** At most the earliest expiry among holders present: pruning is skipped until it passes. */
  earliest: number;
  queue: Queue;
  /** The id's limit as the store knows it: that of the latest acquire that met or joined the queue. */
  idLimit: number;
  /** The last fence granted (0: none): the state is kept until the clock has passed it (lua/lib/fence.lua). */
  fence: number;
  /** The id's typical hold (lua/lib/hold.lua): the state is kept while it counts. */
  hold: HoldRecord | undefined;
  cleanup: unknown;
}

interface LockState {
  token: string | undefined;
  expiresAt: number;
  /** The holder's fence, or the last one granted while free (0: none). */
  fence: number;
  /**
   * The lock's typical hold (lua/lib/hold.lua), kept while it counts. It lives
   * in the lock's value in Redis, which a lapsed holder's expiry takes with it:
   * so does a lapse here.
   */
  hold: HoldRecord | undefined;
  queue: Queue;
  cleanup: unknown;
}

/**
 * The waiting room (lua/lib/queue.lua): every waiter by token, each tenant's
 * waiters in arrival order, and the tag of each waiting tenant's next turn
 * (tenants are served in turn: see lua/lib/grant.lua). A lock's waiters are
 * all the tenant "". `earliest` is at most the earliest waiter lease end:
 * pruning waits until it passes.
 */
interface Queue {
  waiters: Map<string, Waiter>;
  tenants: Map<string, Map<string, Waiter>>;
  turns: Turns;
  /** The tag of the last turn served. */
  virtual: number;
  earliest: number;
}

const newQueue = (): Queue => ({
  waiters: new Map(),
  tenants: new Map(),
  turns: new Turns(),
  virtual: 0,
  earliest: Number.POSITIVE_INFINITY,
});

// ---- holders (lua/lib/holders.lua) ----

function holdersAdd(state: SemaphoreState, token: string, weight: number, expiresAt: number): void {
  const tenant = tenantOf(token);
  state.holders.set(token, { expiresAt, weight, tenant });
  state.used += weight;
  if (tenant !== "") state.tenantUsed.set(tenant, (state.tenantUsed.get(tenant) ?? 0) + weight);
  state.earliest = Math.min(state.earliest, expiresAt);
}

function holdersRemove(state: SemaphoreState, token: string): Holder | undefined {
  const holder = state.holders.get(token);
  if (holder === undefined) return undefined;
  state.holders.delete(token);
  state.used -= holder.weight;
  if (holder.tenant !== "") {
    const left = (state.tenantUsed.get(holder.tenant) ?? 0) - holder.weight;
    if (left > 0) state.tenantUsed.set(holder.tenant, left);
    else state.tenantUsed.delete(holder.tenant);
    // Parked at its cap, the tenant may fit again (lua/lib/holders.lua).
    state.queue.turns.unpark(holder.tenant);
  }
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

/** Ms until the nearest live lease (of `tenant`, if given) ends, a reservation included: when a permit frees at the latest. */
function holdersNext(state: SemaphoreState, now: number, tenant?: string): number {
  let nearest = Number.POSITIVE_INFINITY;
  for (const holder of state.holders.values()) {
    if (holder.expiresAt > now && (tenant === undefined || holder.tenant === tenant))
      nearest = Math.min(nearest, holder.expiresAt);
  }
  return untilMs(nearest, now);
}

function tenantUsed(state: SemaphoreState, tenant: string): number {
  return tenant === "" ? 0 : (state.tenantUsed.get(tenant) ?? 0);
}

// ---- queue (lua/lib/queue.lua) ----

function queueDrop(queue: Queue, token: string): void {
  const waiter = queue.waiters.get(token);
  if (waiter === undefined) return;
  queue.waiters.delete(token);
  const ofTenant = queue.tenants.get(waiter.tenant);
  ofTenant?.delete(token);
  if (ofTenant !== undefined && ofTenant.size === 0) {
    queue.tenants.delete(waiter.tenant);
    queue.turns.delete(waiter.tenant);
  } else {
    // Its first waiter may have changed (another weight, another cap): it may fit now.
    queue.turns.unpark(waiter.tenant);
  }
}

/** Waiters whose process stopped refreshing them (or whose wait ended) leave the queue. */
function queuePrune(queue: Queue, now: number): void {
  if (queue.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  for (const [token, waiter] of queue.waiters) {
    if (waiter.expiresAt <= now) queueDrop(queue, token);
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

/** Joins at the end of its tenant's line; a tenant new to the queue takes the turn after the last one served. */
function queueAdd(queue: Queue, token: string, waiter: Waiter): void {
  queue.waiters.set(token, waiter);
  let ofTenant = queue.tenants.get(waiter.tenant);
  if (ofTenant === undefined) {
    ofTenant = new Map();
    queue.tenants.set(waiter.tenant, ofTenant);
    queue.turns.set(waiter.tenant, queue.virtual + 1);
  }
  ofTenant.set(token, waiter);
  queue.earliest = Math.min(queue.earliest, waiter.expiresAt);
}

/** The first waiter of a tenant's line. */
function queueHead(queue: Queue, tenant: string): [string, Waiter] {
  return (queue.tenants.get(tenant) as Map<string, Waiter>).entries().next().value as [string, Waiter];
}

/** A tenant's turn is served: the next is one tag on, if it still has waiters. */
function queueServed(queue: Queue, tenant: string, tag: number): void {
  queue.virtual = tag;
  if (queue.turns.tag(tenant) !== undefined) queue.turns.set(tenant, tag + 1);
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
  takeNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    tenant?: TenantOptions,
  ): AcquireReply;
  /** Takes at once, or queues as a waiter of this process until `join.until` (then `onGrant`), or refuses / is full. */
  waitNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    join: LocalJoin,
    tenant?: TenantOptions,
  ): AcquireReply;
  leaveNow(kind: Kind, key: string, token: string): void;
  /**
   * Reclaims lapsed leases and grants the waiters they make room for (a lease
   * that lapses frees nothing by itself: this is the call at its end); returns
   * the ms until the nearest lease ends, when to look again.
   */
  settleNow(kind: Kind, key: string): number;
  extendNow(kind: Kind, key: string, token: string, leaseMs: number): boolean;
  /** `heldMs`: how long the lease was held, for the id's typical hold (see `Store.semaphoreRelease`). */
  releaseNow(kind: Kind, key: string, token: string, heldMs?: number): boolean;
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
class EmbeddedStore implements LocalStore {
  readonly kind = "memory";
  readonly #semaphores = new Map<string, SemaphoreState>();
  readonly #locks = new Map<string, LockState>();
  readonly #watchers = new Map<string, Set<(grant: Grant) => void>>();
  #closing: Promise<void> | undefined;

  constructor(
    readonly waiterLeaseMs: number,
    readonly clock: MemoryClock,
  ) {
    // A wrapper made with Object.create(store) calls the methods it does not override with itself as
    // `this`, which has none of the #private state: they are bound to the store once, here.
    const self = this as unknown as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(EmbeddedStore.prototype)) {
      const method = self[name];
      if (name !== "constructor" && typeof method === "function") self[name] = method.bind(this);
    }
  }

  // ---- the Store contract ----

  /**
   * Drops every id and its timer; from then on acquires, reads and refreshes
   * are refused with `ShutdownError`, while an extend or release answers as
   * for a lease nobody holds (nothing is held any more).
   */
  close(): Promise<void> {
    if (this.#closing === undefined) {
      for (const state of [...this.#semaphores.values(), ...this.#locks.values()]) {
        if (state.cleanup !== undefined) this.clock.clearTimeout(state.cleanup);
        state.cleanup = undefined;
      }
      this.#semaphores.clear();
      this.#locks.clear();
      this.#watchers.clear();
      this.#closing = Promise.resolve();
    }
    return this.#closing;
  }

  /** Throws once closed: for every call that would take, read or keep a place. */
  #refuse(): void {
    if (this.#closing !== undefined) throw new ShutdownError(this.kind);
  }

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply> {
    return this.#semaphoreAcquire(key, token, limit, weight, leaseMs, queue, undefined, tenant);
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number): Promise<boolean> {
    return this.extendNow("semaphore", key, token, leaseMs);
  }

  async semaphoreRelease(key: string, token: string, _weight?: number, heldMs?: number): Promise<boolean> {
    return this.releaseNow("semaphore", key, token, heldMs);
  }

  async semaphoreCount(key: string): Promise<number> {
    return (await this.semaphoreStats(key)).holders;
  }

  async semaphoreStats(key: string, tenant?: string): Promise<SemaphoreFigures> {
    this.#refuse();
    const now = this.clock.now();
    const state = this.#semaphores.get(key);
    if (state === undefined)
      return tenant === undefined ? { used: 0, holders: 0, waiting: 0, tenants: 0 } : { used: 0, holders: 0, waiting: 0 };
    let used = 0;
    let holders = 0;
    const tenants = new Set<string>();
    for (const holder of state.holders.values()) {
      if (holder.expiresAt <= now) continue;
      if (holder.tenant !== "") tenants.add(holder.tenant);
      if (tenant !== undefined && holder.tenant !== tenant) continue;
      used += holder.weight;
      holders++;
    }
    let waiting = 0;
    for (const waiter of state.queue.waiters.values()) {
      if (waiter.expiresAt <= now) continue;
      if (waiter.tenant !== "") tenants.add(waiter.tenant);
      if (tenant === undefined || waiter.tenant === tenant) waiting++;
    }
    return tenant === undefined ? { used, holders, waiting, tenants: tenants.size } : { used, holders, waiting };
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    this.#refuse();
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
    this.#refuse();
    const now = this.clock.now();
    const state = this.#semaphores.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), fences: tokens.map(() => 0), retryAfterMs: 1 };
    // A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
    holdersPrune(state, now);
    queuePrune(state.queue, now);
    queueRefresh(state.queue, tokens, claimMs, now);
    this.#grantSemaphore(key, state, now);
    const statuses = tokens.map((token) =>
      state.holders.has(token) ? "held" : state.queue.waiters.has(token) ? "waiting" : "gone",
    ) satisfies WaiterStatus[];
    // A held one gets a new fence, as a claim would (lua/semaphore-refresh-waiters.lua).
    const fences = statuses.map((status) => (status === "held" ? this.#fenceNext(state) : 0));
    this.#expireSemaphore(key, state);
    return { statuses, fences, retryAfterMs: holdersNext(state, now) };
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    return this.#lockAcquire(key, token, ttlMs, queue, undefined);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    return this.extendNow("lock", key, token, ttlMs);
  }

  async lockRelease(key: string, token: string, heldMs?: number): Promise<boolean> {
    return this.releaseNow("lock", key, token, heldMs);
  }

  async lockStats(key: string): Promise<LockStats> {
    this.#refuse();
    const now = this.clock.now();
    const state = this.#locks.get(key);
    if (state?.token === undefined || state.expiresAt <= now) return { held: false, expiresInMs: 0 };
    return { held: true, expiresInMs: Math.ceil(state.expiresAt - now) };
  }

  async lockInspect(key: string): Promise<Inspection> {
    this.#refuse();
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
    this.#refuse();
    const now = this.clock.now();
    const state = this.#locks.get(key);
    if (state === undefined) return { statuses: tokens.map(() => "gone"), fences: tokens.map(() => 0), retryAfterMs: 1 };
    queuePrune(state.queue, now);
    queueRefresh(state.queue, tokens, claimMs, now);
    this.#settleLock(key, state, now);
    this.#expireLock(key, state);
    return {
      statuses: tokens.map((token) => (state.token === token ? "held" : state.queue.waiters.has(token) ? "waiting" : "gone")),
      fences: tokens.map((token) => (state.token === token ? state.fence : 0)),
      retryAfterMs: lockNext(state, now),
    };
  }

  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    this.#refuse();
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

  takeNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    tenant?: TenantOptions,
  ): AcquireReply {
    return kind === "semaphore"
      ? this.#semaphoreAcquire(key, token, limit, weight, leaseMs, undefined, undefined, tenant)
      : this.#lockAcquire(key, token, leaseMs, undefined, undefined);
  }

  waitNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    join: LocalJoin,
    tenant?: TenantOptions,
  ): AcquireReply {
    return kind === "semaphore"
      ? this.#semaphoreAcquire(key, token, limit, weight, join.leaseMs, undefined, join, tenant)
      : this.#lockAcquire(key, token, join.leaseMs, undefined, join);
  }

  settleNow(kind: Kind, key: string): number {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined) return 1;
      this.#settleLock(key, state, now);
      return lockNext(state, now);
    }
    const state = this.#semaphores.get(key);
    if (state === undefined) return 1;
    holdersPrune(state, now);
    queuePrune(state.queue, now);
    this.#grantSemaphore(key, state, now);
    return holdersNext(state, now);
  }

  leaveNow(kind: Kind, key: string, token: string): void {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined) return;
      lockLapse(state, now);
      if (state.token === token) state.token = undefined;
      queueDrop(state.queue, token);
      this.#settleLock(key, state, now);
      return;
    }
    const state = this.#semaphores.get(key);
    if (state === undefined) return;
    holdersRemove(state, token);
    queueDrop(state.queue, token);
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

  releaseNow(kind: Kind, key: string, token: string, heldMs?: number): boolean {
    const now = this.clock.now();
    if (kind === "lock") {
      const state = this.#locks.get(key);
      if (state === undefined) return false;
      lockLapse(state, now);
      const ours = state.token === token;
      if (ours) {
        if (heldMs !== undefined && heldMs >= 0) state.hold = foldHold(state.hold, now, state.expiresAt, heldMs);
        state.token = undefined;
      }
      this.#settleLock(key, state, now);
      return ours;
    }
    const state = this.#semaphores.get(key);
    if (state === undefined) return false;
    const held = holdersRemove(state, token);
    if (held !== undefined && held.expiresAt > now && heldMs !== undefined && heldMs >= 0) {
      state.hold = foldHold(state.hold, now, held.expiresAt, heldMs);
    }
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
    tenantCall?: TenantOptions,
  ): AcquireReply {
    this.#refuse();
    const now = this.clock.now();
    const state = this.#semaphore(key);
    holdersPrune(state, now);
    if (state.queue.waiters.size > 0) {
      queuePrune(state.queue, now);
      // This caller's limit is now the id's limit as the store knows it, for the grants below.
      state.idLimit = limit;
      this.#grantSemaphore(key, state, now);
    }
    const reply = this.#takeOrJoin(state, token, limit, weight, leaseMs, queue, local, tenantCall, now);
    this.#expireSemaphore(key, state);
    return withHold(reply, state.hold, now);
  }

  /**
   * A newcomer is admitted at once exactly when it would be granted at once had
   * it joined the queue (lua/semaphore-acquire.lua): it joins, the grants run in
   * turn, and it holds a full lease, or stays queued, or, failing fast, leaves.
   */
  #takeOrJoin(
    state: SemaphoreState,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue: QueueOptions | undefined,
    local: LocalJoin | undefined,
    tenantCall: TenantOptions | undefined,
    now: number,
  ): AcquireReply {
    const held = state.holders.get(token);
    if (held !== undefined) {
      // A re-sent acquire, or a waiter claiming its grant: refresh, never count twice (a new fence).
      held.expiresAt = now + leaseMs;
      state.earliest = Math.min(state.earliest, held.expiresAt);
      return { acquired: true, retryAfterMs: 0, fence: this.#fenceNext(state) };
    }
    const waiter = state.queue.waiters.get(token);
    if (waiter !== undefined) {
      queueTouch(state.queue, waiter, now + (queue?.claimMs ?? 0));
      return { acquired: false, queued: true, retryAfterMs: holdersNext(state, now) };
    }
    const tenant = tenantOf(token);
    const tenantLimit = tenantCall?.limit ?? Number.POSITIVE_INFINITY;
    const fitsTenant = tenantUsed(state, tenant) + weight <= tenantLimit;
    // Nobody waits: the newcomer's turn is now.
    if (state.queue.waiters.size === 0 && state.used + weight <= limit && fitsTenant) {
      holdersAdd(state, token, weight, now + leaseMs);
      return { acquired: true, retryAfterMs: 0, fence: this.#fenceNext(state) };
    }
    const queueing = queue !== undefined || local !== undefined;
    if (queueing) {
      const maxQueue = queue?.maxQueue ?? local?.maxQueue ?? 0;
      const tenantMax = tenantCall?.maxQueue ?? 0;
      if (
        (maxQueue > 0 && state.queue.waiters.size >= maxQueue) ||
        (tenantMax > 0 && (state.queue.tenants.get(tenant)?.size ?? 0) >= tenantMax)
      ) {
        return { acquired: false, queueFull: true, retryAfterMs: holdersNext(state, now) };
      }
    }
    // Join (failing fast, only to see whether its turn is now), then grant in turn.
    queueAdd(state.queue, token, {
      tenant,
      weight,
      limit,
      tenantLimit,
      expiresAt: queue !== undefined ? now + queue.claimMs : local !== undefined ? local.until : now + 1,
      ...(local !== undefined ? { local: { leaseMs: local.leaseMs, onGrant: local.onGrant } } : {}),
    });
    state.idLimit = limit;
    const fence = this.#grant(state, now, token, leaseMs);
    if (fence !== undefined) return { acquired: true, retryAfterMs: 0, fence };
    if (queueing) return { acquired: false, queued: true, retryAfterMs: holdersNext(state, now) };
    queueDrop(state.queue, token);
    if (!fitsTenant) return { acquired: false, tenantFull: true, retryAfterMs: holdersNext(state, now, tenant) };
    return { acquired: false, retryAfterMs: holdersNext(state, now) };
  }

  #lockAcquire(
    key: string,
    token: string,
    ttlMs: number,
    queue: QueueOptions | undefined,
    local: LocalJoin | undefined,
  ): AcquireReply {
    this.#refuse();
    const now = this.clock.now();
    const state = this.#lock(key);
    this.#settleLock(key, state, now);
    let reply: AcquireReply;
    const waiter = state.queue.waiters.get(token);
    if (state.token === token) {
      // A re-sent acquire, or a waiter claiming its grant: it keeps its fence.
      state.expiresAt = now + ttlMs;
      reply = { acquired: true, retryAfterMs: 0, fence: state.fence };
    } else if (waiter !== undefined) {
      queueTouch(state.queue, waiter, now + (queue?.claimMs ?? 0));
      reply = { acquired: false, queued: true, retryAfterMs: lockNext(state, now) };
    } else if (state.token === undefined && state.queue.waiters.size === 0) {
      state.token = token;
      state.expiresAt = now + ttlMs;
      reply = { acquired: true, retryAfterMs: 0, fence: this.#fenceNext(state) };
    } else {
      const retryAfterMs = lockNext(state, now);
      const maxQueue = queue?.maxQueue ?? local?.maxQueue ?? 0;
      if (queue === undefined && local === undefined) reply = { acquired: false, retryAfterMs };
      else if (maxQueue > 0 && state.queue.waiters.size >= maxQueue) reply = { acquired: false, queueFull: true, retryAfterMs };
      else {
        queueAdd(state.queue, token, {
          tenant: "",
          weight: 1,
          limit: 1,
          tenantLimit: Number.POSITIVE_INFINITY,
          expiresAt: queue !== undefined ? now + queue.claimMs : (local as LocalJoin).until,
          ...(local !== undefined ? { local: { leaseMs: local.leaseMs, onGrant: local.onGrant } } : {}),
        });
        reply = { acquired: false, queued: true, retryAfterMs };
      }
    }
    this.#expireLock(key, state);
    return withHold(reply, state.hold, now);
  }

  // ---- per-id state ----

  #semaphore(key: string): SemaphoreState {
    let state = this.#semaphores.get(key);
    if (state === undefined) {
      state = {
        key,
        holders: new Map(),
        tenantUsed: new Map(),
        used: 0,
        earliest: Number.POSITIVE_INFINITY,
        queue: newQueue(),
        idLimit: 0,
        fence: 0,
        hold: undefined,
        cleanup: undefined,
      };
      this.#semaphores.set(key, state);
    }
    return state;
  }

  #lock(key: string): LockState {
    let state = this.#locks.get(key);
    if (state === undefined) {
      state = { token: undefined, expiresAt: 0, fence: 0, hold: undefined, queue: newQueue(), cleanup: undefined };
      this.#locks.set(key, state);
    }
    return state;
  }

  #grantSemaphore(key: string, state: SemaphoreState, now: number): void {
    this.#grant(state, now);
    // (The announcement and the told waiters are handled in #grant; key for the expiry timer.)
    this.#expireSemaphore(key, state);
  }

  /**
   * Grants in turn (lua/lib/grant.lua): over the waiting tenants in turn order,
   * a tenant at its cap is parked (it holds back nobody else, and is not read
   * again until it could fit: see {@link Turns}), and the first
   * whose next waiter does not fit the permits (its own limit and the id's)
   * stops the grants (nobody overtakes it). A grant reserves the permits until
   * the waiter's own lease ends; a waiter of this process gets its full lease
   * at once and is told directly; `self`, the newcomer of this very call, gets
   * a full lease of `selfLeaseMs` and is not announced. Each grant gets its
   * fence, in the order made; returns that of `self` when it was granted.
   */
  #grant(state: SemaphoreState, now: number, self?: string, selfLeaseMs = 0): number | undefined {
    let granted: string[] | undefined;
    let fences: number[] | undefined;
    let told: [LocalWaiter, number][] | undefined;
    let selfFence: number | undefined;
    let reservedMs = Number.POSITIVE_INFINITY;
    const queue = state.queue;
    for (let turn = queue.turns.first(); turn !== undefined; turn = queue.turns.first()) {
      const [tenant, tag] = turn;
      const [token, waiter] = queueHead(queue, tenant);
      if (tenantUsed(state, tenant) + waiter.weight > waiter.tenantLimit) {
        queue.turns.park(tenant);
        continue;
      }
      if (state.used + waiter.weight > Math.min(waiter.limit, state.idLimit)) break;
      queueDrop(queue, token);
      queueServed(queue, tenant, tag);
      const fence = this.#fenceNext(state);
      if (token === self) {
        holdersAdd(state, token, waiter.weight, now + selfLeaseMs);
        selfFence = fence;
      } else if (waiter.local !== undefined) {
        holdersAdd(state, token, waiter.weight, now + waiter.local.leaseMs);
        told ??= [];
        told.push([waiter.local, fence]);
      } else {
        holdersAdd(state, token, waiter.weight, waiter.expiresAt);
        granted ??= [];
        fences ??= [];
        granted.push(token);
        fences.push(fence);
        reservedMs = Math.min(reservedMs, waiter.expiresAt - now);
      }
    }
    if (granted !== undefined) {
      this.#announce(state.key, { tokens: granted, fences: fences as number[], reservedMs: Math.max(1, Math.ceil(reservedMs)) });
    }
    if (told !== undefined) for (const [local, fence] of told) local.onGrant(now, fence);
    return selfFence;
  }

  /** The fence of a grant made now (lua/lib/fence.lua): past the id's last, and not behind the clock. */
  #fenceNext(state: { fence: number }): number {
    state.fence = Math.max(state.fence + 1, this.clock.micros());
    return state.fence;
  }

  /** Drops a lapsed holder and lapsed waiters, then hands a free lock to the head waiter (lua/lib/settle-lock.lua). */
  #settleLock(key: string, state: LockState, now: number): void {
    lockLapse(state, now);
    if (state.queue.waiters.size === 0) return;
    queuePrune(state.queue, now);
    if (state.token !== undefined) return;
    const head = state.queue.waiters.entries().next();
    if (head.done === true) return;
    const [token, waiter] = head.value;
    queueDrop(state.queue, token);
    state.token = token;
    state.expiresAt = waiter.local === undefined ? waiter.expiresAt : now + waiter.local.leaseMs;
    const fence = this.#fenceNext(state);
    this.#expireLock(key, state);
    if (waiter.local !== undefined) waiter.local.onGrant(now, fence);
    else this.#announce(key, { tokens: [token], fences: [fence], reservedMs: Math.max(1, Math.ceil(waiter.expiresAt - now)) });
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
      // The last fence stays until the clock has passed it (lua/lib/fence.lua); the typical hold while it counts.
      if (state.fence >= this.clock.micros()) return now + 1;
      const hold = holdKeptUntil(state.hold, now);
      if (hold !== undefined) return hold;
      if (this.#semaphores.get(key) === state) this.#semaphores.delete(key);
      return undefined;
    });
  }

  #expireLock(key: string, state: LockState): void {
    if (state.cleanup !== undefined) return;
    const latest = (): number => latestOf(state.token === undefined ? [] : [state], state.queue.waiters.values());
    this.#expire(state, () => {
      const now = this.clock.now();
      lockLapse(state, now);
      queuePrune(state.queue, now);
      if (state.token !== undefined || state.queue.waiters.size > 0) return latest();
      if (state.fence >= this.clock.micros()) return now + 1;
      const hold = holdKeptUntil(state.hold, now);
      if (hold !== undefined) return hold;
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

/** A holder whose lease ended is gone, and with it the typical hold its key carried in Redis (lua/lib/settle-lock.lua). */
function lockLapse(state: LockState, now: number): void {
  if (state.token === undefined || state.expiresAt > now) return;
  state.token = undefined;
  state.hold = undefined;
}

/** A reply that did not acquire says the id's typical hold, while it counts. */
function withHold(reply: AcquireReply, hold: HoldRecord | undefined, now: number): AcquireReply {
  if (reply.acquired) return reply;
  const holdMs = holdMsOf(hold, now);
  if (holdMs !== undefined) reply.holdMs = holdMs;
  return reply;
}

function lockNext(state: LockState, now: number): number {
  return state.token === undefined ? 1 : untilMs(state.expiresAt, now);
}

function latestOf(...groups: Iterable<{ expiresAt: number }>[]): number {
  let latest = 0;
  for (const group of groups) for (const entry of group) latest = Math.max(latest, entry.expiresAt);
  return latest;
}

/** Live waiters in the order they will be served: tenants in turn, each tenant's in arrival order. */
function inspectQueue(queue: Queue, now: number): Inspection["waiters"] {
  return queue.turns
    .inOrder()
    .flatMap((tenant) => [...(queue.tenants.get(tenant) as Map<string, Waiter>)])
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
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return createMemoryStore(options, processClock);
}

/** {@link memoryStore} on a given clock: the model-based suite passes one it advances itself. */
export function createMemoryStore(
  options: MemoryStoreOptions,
  clock: MemoryClock,
): MemoryStore & { debugIds: EmbeddedStore["debugIds"] } {
  const given = optionsObject(options, "memoryStore");
  knownOptions(given, ["waiterLeaseMs"], "memoryStore");
  return new EmbeddedStore(
    given.waiterLeaseMs === undefined
      ? WAITER_LEASE_MS
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without being refreshed, e.g. 5000.",
        ),
    clock,
  );
}

/**
 * The embedded store {@link memoryStore} makes.
 *
 * @example
 * ```ts
 * const store: MemoryStore = memoryStore();
 * await store.close();
 * ```
 */
export interface MemoryStore extends Store {
  readonly kind: "memory";
  /**
   * Drops every id the store keeps and its timer (none keeps the process
   * alive even before); every later acquire, read or refresh is refused with
   * `ShutdownError`, and an extend or release answers as for a lease nobody
   * holds. Close the semaphores and locks made on it first. A second call
   * returns the same promise.
   */
  close(): Promise<void>;
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

/**
 * True for the embedded store itself, not for a wrapper made with `Object.create(store)` (whose
 * overrides must be called): only then may the engine call its synchronous cores at once.
 */
export function isMemoryStore(store: Store): store is LocalStore {
  return Object.getPrototypeOf(store) === EmbeddedStore.prototype;
}

let shared: Store | undefined;

/** The process-wide store used when no `client` is given. */
export function defaultStore(): Store {
  shared ??= memoryStore();
  return shared;
}
