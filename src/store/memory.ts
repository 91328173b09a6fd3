import type { AcquireReply, Store } from "./types.js";

interface Holder {
  expiresAt: number;
  weight: number;
}

interface SemaphoreState {
  holders: Map<string, Holder>;
  used: number;
  /** Earliest expiry among holders: pruning is skipped until it passes. */
  earliest: number;
  cleanup: NodeJS.Timeout | undefined;
}

interface LockState {
  token: string;
  expiresAt: number;
  cleanup: NodeJS.Timeout;
}

/**
 * The embedded store: the same semantics as Redis (lease expiry, pruning,
 * idempotent acquire, token-checked extend and release) inside one process,
 * on the process's monotonic clock. Idle entries are dropped by `unref()`ed
 * timers, so they neither leak nor keep a process alive.
 */
class MemoryStore implements Store {
  readonly kind = "memory";
  private readonly semaphores = new Map<string, SemaphoreState>();
  private readonly locks = new Map<string, LockState>();

  async semaphoreAcquire(key: string, token: string, limit: number, weight: number, leaseMs: number): Promise<AcquireReply> {
    const now = performance.now();
    let state = this.semaphores.get(key);
    if (state === undefined) {
      state = { holders: new Map(), used: 0, earliest: Number.POSITIVE_INFINITY, cleanup: undefined };
      this.semaphores.set(key, state);
    }
    prune(state, now);
    const held = state.holders.get(token);
    if (held !== undefined) {
      held.expiresAt = now + leaseMs;
      this.scheduleCleanup(key, state);
      return { acquired: true, retryAfterMs: 0 };
    }
    if (state.used + weight > limit) {
      return { acquired: false, retryAfterMs: Math.max(1, Math.ceil(state.earliest - now)) };
    }
    state.holders.set(token, { expiresAt: now + leaseMs, weight });
    state.used += weight;
    state.earliest = Math.min(state.earliest, now + leaseMs);
    this.scheduleCleanup(key, state);
    return { acquired: true, retryAfterMs: 0 };
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
    if (state === undefined || held === undefined) return false;
    state.holders.delete(token);
    state.used -= held.weight;
    if (state.holders.size === 0) this.dropSemaphore(key, state);
    return held.expiresAt > now;
  }

  async semaphoreCount(key: string): Promise<number> {
    const now = performance.now();
    const state = this.semaphores.get(key);
    if (state === undefined) return 0;
    let live = 0;
    for (const holder of state.holders.values()) if (holder.expiresAt > now) live++;
    return live;
  }

  async lockAcquire(key: string, token: string, ttlMs: number): Promise<AcquireReply> {
    const now = performance.now();
    const current = this.locks.get(key);
    if (current !== undefined && current.expiresAt > now && current.token !== token) {
      return { acquired: false, retryAfterMs: Math.max(1, Math.ceil(current.expiresAt - now)) };
    }
    if (current !== undefined) clearTimeout(current.cleanup);
    this.setLock(key, token, now + ttlMs);
    return { acquired: true, retryAfterMs: 0 };
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const now = performance.now();
    const current = this.locks.get(key);
    if (current === undefined || current.token !== token || current.expiresAt <= now) return false;
    clearTimeout(current.cleanup);
    this.setLock(key, token, now + ttlMs);
    return true;
  }

  async lockRelease(key: string, token: string): Promise<boolean> {
    const now = performance.now();
    const current = this.locks.get(key);
    if (current === undefined || current.token !== token || current.expiresAt <= now) return false;
    clearTimeout(current.cleanup);
    this.locks.delete(key);
    return true;
  }

  private setLock(key: string, token: string, expiresAt: number): void {
    // Timers may fire a little early against performance.now(): drop only a lock that has really expired.
    const expire = (): void => {
      const current = this.locks.get(key);
      if (current?.token !== token) return;
      const left = current.expiresAt - performance.now();
      if (left <= 0) {
        this.locks.delete(key);
        return;
      }
      current.cleanup = setTimeout(expire, Math.ceil(left) + 1);
      current.cleanup.unref();
    };
    const cleanup = setTimeout(expire, Math.ceil(expiresAt - performance.now()) + 1);
    cleanup.unref();
    this.locks.set(key, { token, expiresAt, cleanup });
  }

  /** One timer per key, at the latest expiry: when it fires the key is idle or is rescheduled. */
  private scheduleCleanup(key: string, state: SemaphoreState): void {
    if (state.cleanup !== undefined) return;
    let latest = 0;
    for (const holder of state.holders.values()) latest = Math.max(latest, holder.expiresAt);
    state.cleanup = setTimeout(
      () => {
        state.cleanup = undefined;
        prune(state, performance.now());
        if (state.holders.size === 0) this.dropSemaphore(key, state);
        else this.scheduleCleanup(key, state);
      },
      Math.max(1, Math.ceil(latest - performance.now()) + 1),
    );
    state.cleanup.unref();
  }

  private dropSemaphore(key: string, state: SemaphoreState): void {
    if (state.cleanup !== undefined) clearTimeout(state.cleanup);
    state.cleanup = undefined;
    if (this.semaphores.get(key) === state) this.semaphores.delete(key);
  }
}

function prune(state: SemaphoreState, now: number): void {
  if (state.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  for (const [token, holder] of state.holders) {
    if (holder.expiresAt <= now) {
      state.holders.delete(token);
      state.used -= holder.weight;
    } else {
      earliest = Math.min(earliest, holder.expiresAt);
    }
  }
  state.earliest = earliest;
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
export function memoryStore(): Store {
  return new MemoryStore();
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
