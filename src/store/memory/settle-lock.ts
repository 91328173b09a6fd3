import { untilMs } from "./clock.js";
import { fenceNext } from "./fence.js";
import { queueDrop, queueHead } from "./queue.js";
import type { IdState } from "./state.js";

/** A lock id: its holder (the lock key's value in Redis) beside what every id keeps. */
export interface LockState extends IdState {
  token: string | undefined;
  expiresAt: number;
  // `fence` is the holder's, or the last one granted while free (0: none). `hold` lives in the
  // lock's value in Redis, which a lapsed holder's expiry takes with it: so does a lapse here.
}

/** A holder whose lease ended is gone, and with it the typical hold its key carried in Redis. */
export function lockLapse(state: LockState, now: number): void {
  if (state.token === undefined || state.expiresAt > now) return;
  state.token = undefined;
  state.hold = undefined;
}

/** Ms until the lock's lease ends (1 when free: nothing to wait for). */
export function lockNext(state: LockState, now: number): number {
  return state.token === undefined ? 1 : untilMs(state.expiresAt, now);
}

/** Takes the free lock for `token` until `ends`, with the next fence; returns it. */
export function lockTake(state: LockState, token: string, ends: number): number {
  state.token = token;
  state.expiresAt = ends;
  return fenceNext(state);
}

/**
 * Hands a free lock to the head waiter, until its own waiter lease ends (its
 * reservation) unless its process claims it with a full ttl first, and
 * announces it; a waiter of this process gets its full ttl at once and is
 * told directly. The caller ends with `settle` (settle.ts).
 */
export function grant(state: LockState, now: number): void {
  if (state.token !== undefined) return;
  if (state.queue.lineSize === 0) return;
  const waiter = queueHead(state.queue, "");
  const token = waiter.token;
  queueDrop(state.queue, waiter);
  const local = waiter.local;
  const fence = lockTake(state, token, local === undefined ? waiter.expiresAt : now + local.leaseMs);
  if (local !== undefined) local.onGrant(now, fence);
  else
    state.env.announce(state.key, {
      tokens: [token],
      fences: [fence],
      waiterLeaseMs: Math.max(1, Math.ceil(waiter.expiresAt - now)),
    });
}
