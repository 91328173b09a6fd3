import { ShutdownError } from "../../errors/index.js";
import type * as calls from "../contract/calls.js";
import type { Grant, QueueOptions, TenantOptions } from "../contract/calls.js";
import { GroupedStore, type Kind } from "../contract/grouped.js";
import { IN_PROCESS } from "../contract/shape.js";
import type { AcquireReply, Answer, Inspection, LockStats, SemaphoreCounts, Store, WaiterRefresh } from "../contract/types.js";
import { type MemoryClock, processClock } from "./clock.js";
import type { SemaphoreState } from "./holders.js";
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
import { leave, refreshWaiters, release } from "./steps.js";

const GONE: WaiterRefresh["statuses"][number] = "gone";

/**
 * The embedded store: the same semantics as Redis (lease expiry, pruning,
 * idempotent acquire, token-checked extend and release, a FIFO waiting room
 * with grants) inside one process, on the process's monotonic clock. Its
 * modules and functions are named after the Lua they mirror (`lua/lib/`,
 * `lua/*.lua`), so the two can be read side by side.
 */
export class EmbeddedStore extends GroupedStore implements Store {
  readonly kind = "memory";
  /** Answers in this process and never hangs: the engine sets no timer on its calls. */
  readonly timeoutMs = 0;
  readonly #semaphores = new Map<string, IdState>();
  readonly #locks = new Map<string, IdState>();
  readonly #watchers = new Map<string, Set<(grant: Grant) => void>>();
  readonly #env: Env;
  #closing: Promise<void> | undefined;

  constructor(
    readonly waiterLeaseMs: number,
    readonly clock: MemoryClock,
  ) {
    super();
    Object.defineProperty(this, IN_PROCESS, { value: this });
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
      const waiting: LocalJoin[] = [];
      for (const state of [...this.#semaphores.values(), ...this.#locks.values()]) {
        if (state.cleanup !== undefined) this.clock.clearTimeout(state.cleanup);
        state.cleanup = undefined;
        for (const waiter of state.queue.waiters.entries) if (waiter.local !== undefined) waiting.push(waiter.local);
      }
      this.#semaphores.clear();
      this.#locks.clear();
      this.#watchers.clear();
      this.#closing = Promise.resolve();
      // Nothing will free a permit for them any more: their waits end now, not at their waitMs.
      for (const local of waiting) local.onClose(new ShutdownError(this.kind));
    }
    return this.#closing;
  }

  /** Throws once closed: for every call that would take, read or keep a place. */
  #refuse(): void {
    if (this.#closing !== undefined) throw new ShutdownError(this.kind);
  }

  // ---- the Store contract, grouped by ../contract/grouped.ts: the calls the engine makes on every
  // lease answer at once (no promise: see `Answer`), the reads in a promise ----

  acquire(kind: Kind, call: calls.SemaphoreAcquireCall | calls.LockAcquireCall): Answer<AcquireReply> {
    // A failure is a rejection, as from any store: only an answer comes at once.
    if (this.#closing !== undefined) return Promise.reject(new ShutdownError(this.kind));
    // A lock's call has no limit, weight or tenant: #acquireNow reads them for a semaphore only.
    const { storeKey: key, token, limit, weight, leaseMs, queue, tenant, madeAt, recorded } = call as calls.SemaphoreAcquireCall;
    const join = queue?.waiter;
    if (join === undefined) {
      const reply = this.#acquireNow(kind, key, token, limit, weight, leaseMs, queue, undefined, tenant, madeAt);
      // The record is for a caller that keeps it: to anyone else the reply is Redis's.
      return reply.record === undefined || recorded === true
        ? reply
        : { acquired: true, retryAfterMs: 0, fence: reply.fence as number };
    }
    const reply = this.#acquireNow(kind, key, token, limit, weight, join.leaseMs, undefined, join, tenant, madeAt);
    if (reply.queued === true) reply.handedOff = true;
    return reply;
  }

  extend(kind: Kind, call: calls.SemaphoreExtendCall): boolean {
    const state = this.#ids(kind).get(call.storeKey);
    if (state === undefined) return false;
    const now = this.clock.now();
    return kind === "semaphore"
      ? semaphoreExtend(state as SemaphoreState, call.token, call.leaseMs, now, call.record)
      : lockExtend(state as LockState, call.token, call.leaseMs, now);
  }

  release(kind: Kind, call: calls.SemaphoreReleaseCall): boolean {
    const state = this.#ids(kind).get(call.storeKey);
    return state !== undefined && release(primitiveOf(kind), state, call.token, this.#now(call.sentAt), call.heldMs, call.record);
  }

  async count(call: calls.KeyCall): Promise<number> {
    return (await this.semaphoreCounts(call)).holders;
  }

  async semaphoreCounts(call: calls.SemaphoreStatsCall): Promise<SemaphoreCounts> {
    this.#refuse();
    return semaphoreStats(this.#semaphores.get(call.storeKey) as SemaphoreState | undefined, this.clock.now(), call.tenant);
  }

  async lockStatus(call: calls.KeyCall): Promise<LockStats> {
    this.#refuse();
    return lockStats(this.#locks.get(call.storeKey) as LockState | undefined, this.clock.now());
  }

  async inspect(kind: Kind, call: calls.KeyCall): Promise<Inspection> {
    this.#refuse();
    const state = this.#ids(kind).get(call.storeKey);
    const now = this.clock.now();
    return kind === "semaphore"
      ? semaphoreInspect(state as SemaphoreState | undefined, now)
      : lockInspect(state as LockState | undefined, now);
  }

  leave(kind: Kind, call: calls.TokenCall): void {
    const state = this.#ids(kind).get(call.storeKey);
    if (state !== undefined) leave(primitiveOf(kind), state, call.token, this.clock.now());
  }

  /**
   * Also what a waiter of this process calls when the nearest lease ends (a lapsed lease frees
   * nothing by itself): its own token is not refreshed (it has no waiter lease), the rest is the same.
   */
  refreshWaiters(kind: Kind, call: calls.RefreshWaitersCall): Answer<WaiterRefresh> {
    if (this.#closing !== undefined) return Promise.reject(new ShutdownError(this.kind));
    const { storeKey: key, tokens, waiterLeaseMs } = call;
    const state = this.#ids(kind).get(key);
    if (state === undefined) return { statuses: tokens.map(() => GONE), fences: tokens.map(() => 0), retryAfterMs: 1 };
    return refreshWaiters(primitiveOf(kind), state, tokens, waiterLeaseMs, this.clock.now());
  }

  async watch({ storeKey: key, onGrant }: calls.WatchCall): Promise<() => void> {
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

  /** The store's time: the caller's reading of the process clock when it made one just now, else its clock's. */
  #now(at: number | undefined): number {
    return at !== undefined && this.clock === processClock ? at : this.clock.now();
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
    queue: QueueOptions | undefined,
    join: LocalJoin | undefined,
    tenant: (TenantOptions & { readonly name?: string }) | undefined,
    fresh?: number,
  ): AcquireReply {
    this.#refuse();
    const now = this.#now(fresh);
    if (kind === "lock") return lockAcquire(lockState(this.#locks, this.#env, key), token, leaseMs, queue, join, now);
    const state = semaphoreState(this.#semaphores, this.#env, key);
    const tenantName = fresh === undefined ? undefined : (tenant?.name ?? "");
    return semaphoreAcquire(state, token, limit, weight, leaseMs, queue, join, tenant, now, tenantName);
  }

  #ids(kind: Kind): Map<string, IdState> {
    return kind === "semaphore" ? this.#semaphores : this.#locks;
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
