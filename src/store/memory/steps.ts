import type { WaiterRefresh } from "../contract/types.js";
import { holdAdd } from "./hold.js";
import { queueLeave, queuePrune, queueRefresh } from "./queue.js";
import { settle } from "./settle.js";
import type { IdState, Primitive } from "./state.js";

// The steps a semaphore and a lock take alike, each with its own holders and grants (state.ts):
// in Redis, the `semaphore-*` and `lock-*` scripts of the same name.

/**
 * Returns `token`'s lease (and grants the waiters it makes room for); true
 * only if it was still live (lua/*-release.lua). `heldMs`, how long it was
 * held, is folded into the id's typical hold. Without waiters the id is not
 * settled: its timer stands, and the release stays the cheapest call.
 * `held`: the engine's record of the lease (`AcquireReply.record`), if any.
 */
export function release<State extends IdState>(
  primitive: Primitive<State>,
  state: State,
  token: string,
  now: number,
  heldMs?: number,
  held?: unknown,
): boolean {
  const ends = primitive.remove(state, token, now, held);
  const live = ends !== undefined && ends > now;
  if (live && heldMs !== undefined && heldMs >= 0) holdAdd(state, now, ends, heldMs);
  primitive.lapse(state, now);
  if (state.queue.waiters.size > 0) {
    queuePrune(state.queue, now);
    primitive.grant(state, now);
    settle(primitive, state);
  }
  return live;
}

/** A caller gives up its lease or its place in the queue, whichever it has (lua/*-leave.lua). */
export function leave<State extends IdState>(primitive: Primitive<State>, state: State, token: string, now: number): void {
  primitive.remove(state, token, now);
  queueLeave(state.queue, token);
  settleNow(primitive, state, now);
}

/**
 * Reclaims lapsed leases and waiters and grants the waiters they make room
 * for (a lease that lapses frees nothing by itself: this is the call at its
 * end); returns the ms until the nearest lease ends, when to look again.
 */
export function settleNow<State extends IdState>(primitive: Primitive<State>, state: State, now: number): number {
  primitive.lapse(state, now);
  queuePrune(state.queue, now);
  primitive.grant(state, now);
  settle(primitive, state);
  return primitive.next(state, now);
}

/**
 * Keeps these waiters queued for `waiterLeaseMs` more, after the grants that are
 * due, and says of each whether it holds (with its fence), waits, or is gone
 * (lua/*-refresh-waiters.lua). A waiter whose lease lapsed is gone, even if
 * its process is back: it rejoins at the back.
 */
export function refreshWaiters<State extends IdState>(
  primitive: Primitive<State>,
  state: State,
  tokens: readonly string[],
  waiterLeaseMs: number,
  now: number,
): WaiterRefresh {
  primitive.lapse(state, now);
  queuePrune(state.queue, now);
  queueRefresh(state.queue, tokens, waiterLeaseMs, now);
  primitive.grant(state, now);
  const statuses: WaiterRefresh["statuses"] = [];
  const fences: number[] = [];
  for (const token of tokens) {
    const fence = primitive.heldFence(state, token);
    statuses.push(fence !== undefined ? "held" : state.queue.waiters.find(token) !== undefined ? "waiting" : "gone");
    fences.push(fence ?? 0);
  }
  settle(primitive, state);
  return { statuses, fences, retryAfterMs: primitive.next(state, now) };
}
