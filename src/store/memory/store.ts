import { ShutdownError } from "../../errors.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  TenantOptions,
  WaiterRefresh,
} from "../types.js";
import type { MemoryClock } from "./clock.js";
import type { SemaphoreState } from "./holders.js";
import type { Kind, LocalStore } from "./local.js";
import { lockAcquire, lockExtend, lockInspect, lockPrimitive, lockState, lockStats } from "./lock.js";
import type { LocalJoin } from "./queue.js";
import {
  semaphoreAcquire,
  semaphoreExtend,
  semaphoreInspect,
  semaphorePrimitive,
  semaphoreState,
  semaphoreStats,
} from "./semaphore.js";
import type { LockState } from "./settle-lock.js";
import type { Env, IdState, Primitive } from "./state.js";
import { leave, refreshWaiters, release, settleNow } from "./steps.js";

const GONE: WaiterRefresh["statuses"][number] = "gone";

/**
 * The embedded store: the same semantics as Redis (lease expiry, pruning,
 * idempotent acquire, token-checked extend and release, a FIFO waiting room
 * with grants) inside one process, on the process's monotonic clock. Its
 * modules and functions are named after the Lua they mirror (`lua/lib/`,
 * `lua/*.lua`), so the two can be read side by side. The Store methods are
 * the synchronous cores wrapped in a promise.
 */
export class EmbeddedStore implements LocalStore {
  readonly kind = "memory";
  readonly #semaphores = new Map<string, IdState>();
  readonly #locks = new Map<string, IdState>();
  readonly #watchers = new Map<string, Set<(grant: Grant) => void>>();
  readonly #env: Env;
  #closing: Promise<void> | undefined;

  constructor(
    readonly waiterLeaseMs: number,
    readonly clock: MemoryClock,
  ) {
    this.#env = { clock, announce: (key, grant) => this.#announce(key, grant) };
    // A wrapper made with Object.create(store) calls the methods it does not override with itself as
    // `this`, which has none of the #private state: they are bound to the store once, here.
    const self = this as unknown as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(EmbeddedStore.prototype)) {
      const method = self[name];
      if (name !== "constructor" && typeof method === "function") self[name] = method.bind(this);
    }
  }

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

  // ---- the Store contract: the cores below, in a promise ----

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply> {
    this.#refuse();
    const state = semaphoreState(this.#semaphores, this.#env, key);
    return semaphoreAcquire(state, token, limit, weight, leaseMs, queue, undefined, tenant, this.clock.now());
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
    return semaphoreStats(this.#semaphores.get(key) as SemaphoreState | undefined, this.clock.now(), tenant);
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    this.#refuse();
    return semaphoreInspect(this.#semaphores.get(key) as SemaphoreState | undefined, this.clock.now());
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    this.leaveNow("semaphore", key, token);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    return this.#refreshWaiters("semaphore", key, tokens, claimMs);
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    this.#refuse();
    return lockAcquire(lockState(this.#locks, this.#env, key), token, ttlMs, queue, undefined, this.clock.now());
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    return this.extendNow("lock", key, token, ttlMs);
  }

  async lockRelease(key: string, token: string, heldMs?: number): Promise<boolean> {
    return this.releaseNow("lock", key, token, heldMs);
  }

  async lockStats(key: string): Promise<LockStats> {
    this.#refuse();
    return lockStats(this.#locks.get(key) as LockState | undefined, this.clock.now());
  }

  async lockInspect(key: string): Promise<Inspection> {
    this.#refuse();
    return lockInspect(this.#locks.get(key) as LockState | undefined, this.clock.now());
  }

  async lockLeave(key: string, token: string): Promise<void> {
    this.leaveNow("lock", key, token);
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    return this.#refreshWaiters("lock", key, tokens, claimMs);
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
    return this.#acquireNow(kind, key, token, limit, weight, leaseMs, undefined, tenant);
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
    return this.#acquireNow(kind, key, token, limit, weight, join.leaseMs, join, tenant);
  }

  settleNow(kind: Kind, key: string): number {
    const state = this.#ids(kind).get(key);
    return state === undefined ? 1 : settleNow(primitiveOf(kind), state, this.clock.now());
  }

  leaveNow(kind: Kind, key: string, token: string): void {
    const state = this.#ids(kind).get(key);
    if (state !== undefined) leave(primitiveOf(kind), state, token, this.clock.now());
  }

  extendNow(kind: Kind, key: string, token: string, leaseMs: number): boolean {
    const state = this.#ids(kind).get(key);
    if (state === undefined) return false;
    const now = this.clock.now();
    return kind === "semaphore"
      ? semaphoreExtend(state as SemaphoreState, token, leaseMs, now)
      : lockExtend(state as LockState, token, leaseMs, now);
  }

  releaseNow(kind: Kind, key: string, token: string, heldMs?: number): boolean {
    const state = this.#ids(kind).get(key);
    return state !== undefined && release(primitiveOf(kind), state, token, this.clock.now(), heldMs);
  }

  /** The ids this store keeps state for, and whether each has its clean-up timer: for the model-based suite. */
  debugIds(): { semaphores: [string, boolean][]; locks: [string, boolean][] } {
    const ids = (map: Map<string, IdState>): [string, boolean][] =>
      [...map].map(([key, state]) => [key, state.cleanup !== undefined]);
    return { semaphores: ids(this.#semaphores), locks: ids(this.#locks) };
  }

  #acquireNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    join: LocalJoin | undefined,
    tenant: TenantOptions | undefined,
  ): AcquireReply {
    this.#refuse();
    const now = this.clock.now();
    if (kind === "lock") return lockAcquire(lockState(this.#locks, this.#env, key), token, leaseMs, undefined, join, now);
    const state = semaphoreState(this.#semaphores, this.#env, key);
    return semaphoreAcquire(state, token, limit, weight, leaseMs, undefined, join, tenant, now);
  }

  #ids(kind: Kind): Map<string, IdState> {
    return kind === "semaphore" ? this.#semaphores : this.#locks;
  }

  #refreshWaiters(kind: Kind, key: string, tokens: readonly string[], claimMs: number): WaiterRefresh {
    this.#refuse();
    const state = this.#ids(kind).get(key);
    if (state === undefined) return { statuses: tokens.map(() => GONE), fences: tokens.map(() => 0), retryAfterMs: 1 };
    return refreshWaiters(primitiveOf(kind), state, tokens, claimMs, this.clock.now());
  }

  #announce(key: string, grant: Grant): void {
    const listeners = this.#watchers.get(key);
    if (listeners === undefined) return;
    // Never call back into the engine from inside a store call.
    queueMicrotask(() => {
      for (const listener of listeners) listener(grant);
    });
  }
}

/** The steps of a kind's ids (the states in its map are of that kind). */
function primitiveOf(kind: Kind): Primitive<IdState> {
  return (kind === "semaphore" ? semaphorePrimitive : lockPrimitive) as unknown as Primitive<IdState>;
}
