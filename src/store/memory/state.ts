import type { Grant } from "../contract/calls.js";
import type { MemoryClock } from "./clock.js";
import type { HoldRecord } from "./hold.js";
import { newQueue, type Queue } from "./queue.js";

/** What every id's steps need of the store they live in. */
export interface Env {
  readonly clock: MemoryClock;
  /** Tells the id's watchers (other callers' waiting rooms) of grants to waiters that are not of this process. */
  announce(key: string, grant: Grant): void;
}

/**
 * What a semaphore's and a lock's id both keep, as their keys do in Redis:
 * the waiting room, the last fence, the typical hold, and the timer that drops
 * the id once idle (settle.ts), from the map it lives in.
 */
export interface IdState {
  readonly key: string;
  readonly env: Env;
  readonly ids: Map<string, IdState>;
  readonly queue: Queue;
  /** The last fence granted (0: none): the state is kept until the clock has passed it (lua/lib/fence.lua). */
  fence: number;
  /** The id's typical hold (lua/lib/hold.lua): the state is kept while it counts. */
  hold: HoldRecord | undefined;
  cleanup: unknown;
}

/**
 * What differs between a semaphore and a lock in the steps they share
 * (settle.ts, waiters.ts): as in Redis, where the two have their own scripts
 * over the same waiting room (lua/lib/queue.lua).
 */
export interface Primitive<State extends IdState> {
  /** Drops lapsed leases (`holders_prune`; a lock's lapsed holder). */
  lapse(state: State, now: number): void;
  /** Grants waiters that fit now (lua/lib/grant.lua; a lock's in lua/lib/lock.lua). */
  grant(state: State, now: number): void;
  /** Ms until the nearest lease ends: when a permit frees at the latest (`holders_next`, `lock_next`). */
  next(state: State, now: number): number;
  /** The latest lease end held, lapsed or not (0: none): when the id may vanish (`holders_latest`). */
  latest(state: State): number;
  /** The fence a granted waiter learns on its refresh: a semaphore's is new (as a claim's), a lock's is its grant's. */
  heldFence(state: State, token: string): number | undefined;
  /**
   * Takes `token`'s lease away; returns its end, or undefined when it held
   * none (a lock's lapsed holder is gone first). `held`: the record the
   * engine kept from its acquire, if any (see `AcquireReply.record`).
   */
  remove(state: State, token: string, now: number, held?: unknown): number | undefined;
}

/** An id's state, made (by `make`, from what every id keeps) on its first use. */
export function idState<State extends IdState>(
  ids: Map<string, IdState>,
  env: Env,
  key: string,
  make: (base: IdState) => State,
): State {
  let state = ids.get(key) as State | undefined;
  if (state === undefined) {
    state = make({ key, env, ids, queue: newQueue(), fence: 0, hold: undefined, cleanup: undefined });
    ids.set(key, state);
  }
  return state;
}
