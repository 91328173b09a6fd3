import type { QueueOptions } from "../contract/calls.js";
import type { AcquireReply, Inspection, LockStats } from "../contract/types.js";
import { holdRead } from "./hold.js";
import { type LocalJoin, queueInspect, queueJoin, queuePrune, queueTouch, queueWaiter } from "./queue.js";
import { settle } from "./settle.js";
import { grant, type LockState, lockLapse, lockNext, lockTake } from "./settle-lock.js";
import { type Env, type IdState, idState, type Primitive } from "./state.js";

// A lock's steps, as lua/lock-*.lua take them.

export const lockPrimitive: Primitive<LockState> = {
  lapse: lockLapse,
  grant,
  next: lockNext,
  latest: (state) => (state.token === undefined ? 0 : state.expiresAt),
  heldFence: (state, token) => (state.token === token ? state.fence : undefined),
  remove: (state, token, now) => {
    lockLapse(state, now);
    if (state.token !== token) return undefined;
    state.token = undefined;
    return state.expiresAt;
  },
};

/** The id's state, made on its first use. */
export function lockState(ids: Map<string, IdState>, env: Env, key: string): LockState {
  return idState(ids, env, key, (base) => ({ ...base, token: undefined, expiresAt: 0 }));
}

/**
 * Takes the lock, refreshes a re-sent acquire or a waiter's place, or joins
 * the queue (lua/lock-acquire.lua); `local`, a waiter of this process, joins
 * without a waiter lease (see queue.ts).
 */
export function lockAcquire(
  state: LockState,
  token: string,
  ttlMs: number,
  queue: QueueOptions | undefined,
  local: LocalJoin | undefined,
  now: number,
): AcquireReply {
  lockLapse(state, now);
  if (state.queue.waiters.size > 0) {
    queuePrune(state.queue, now);
    grant(state, now);
  }
  let reply: AcquireReply;
  const waiter = state.queue.waiters.find(token);
  if (state.token === token) {
    // A re-sent acquire, or a waiter claiming its grant: it keeps its fence.
    state.expiresAt = now + ttlMs;
    reply = { acquired: true, retryAfterMs: 0, fence: state.fence };
  } else if (waiter !== undefined) {
    queueTouch(state.queue, waiter, now + (queue?.waiterLeaseMs ?? 0));
    reply = { acquired: false, queued: true, retryAfterMs: lockNext(state, now) };
  } else if (state.token === undefined && state.queue.waiters.size === 0) {
    reply = { acquired: true, retryAfterMs: 0, fence: lockTake(state, token, now + ttlMs) };
  } else {
    const retryAfterMs = lockNext(state, now);
    const maxQueue = queue?.maxQueue ?? local?.maxQueue ?? 0;
    if (queue === undefined && local === undefined) reply = { acquired: false, retryAfterMs };
    else if (maxQueue > 0 && state.queue.waiters.size >= maxQueue) reply = { acquired: false, queueFull: true, retryAfterMs };
    else {
      const ends = queue !== undefined ? now + queue.waiterLeaseMs : 0;
      queueJoin(state.queue, token, queueWaiter(token, "", 1, 1, Number.POSITIVE_INFINITY, ends, local));
      reply = { acquired: false, queued: true, retryAfterMs };
    }
  }
  settle(lockPrimitive, state);
  return holdRead(reply, state.hold, now);
}

/** Pushes the holder's lease end to now + `ttlMs`; false unless `token` holds it, live (lua/lock-extend.lua). */
export function lockExtend(state: LockState, token: string, ttlMs: number, now: number): boolean {
  if (state.token !== token || state.expiresAt <= now) return false;
  state.expiresAt = now + ttlMs;
  settle(lockPrimitive, state);
  return true;
}

/** Whether the lock is held, and for how long more (lua/lock-stats.lua). */
export function lockStats(state: LockState | undefined, now: number): LockStats {
  if (state?.token === undefined || state.expiresAt <= now) return { held: false, expiresInMs: 0 };
  return { held: true, expiresInMs: Math.ceil(state.expiresAt - now) };
}

/** The live holder and waiters, in the order waiters will be served (lua/lock-inspect.lua). */
export function lockInspect(state: LockState | undefined, now: number): Inspection {
  if (state === undefined) return { holders: [], waiters: [] };
  const held = state.token !== undefined && state.expiresAt > now;
  return {
    holders: held ? [{ token: state.token as string, weight: 1, expiresInMs: Math.ceil(state.expiresAt - now) }] : [],
    waiters: queueInspect(state.queue, now),
  };
}
