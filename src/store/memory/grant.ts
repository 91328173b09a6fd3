import { fenceNext } from "./fence.js";
import { holdersAdd, type SemaphoreState, tenantUsed } from "./holders.js";
import { lineServed, queueDrop, queueHead, queueServed, type Waiter } from "./queue.js";

/**
 * Grants in turn (lua/lib/grant.lua): over the waiting tenants in turn order,
 * a tenant at its cap is parked (it holds back nobody else, and is not read
 * again until it could fit: see turns.ts), and the first
 * whose next waiter does not fit the permits (its own limit and the id's)
 * stops the grants (nobody overtakes it). A grant reserves the permits until
 * the waiter's own lease ends; a waiter of this process gets its full lease
 * at once and is told directly; `self`, the newcomer of this very call, gets
 * a full lease of `selfLeaseMs` and is not announced. Each grant gets its
 * fence, in the order made; returns that of `self` when it was granted (its
 * holder then in `state.selfHeld`).
 * The caller ends with `settle` (settle.ts).
 */
export function grant(state: SemaphoreState, now: number, self?: string, selfLeaseMs = 0): number | undefined {
  let granted: string[] | undefined;
  let fences: number[] | undefined;
  let selfFence: number | undefined;
  let waiterLeaseMs = Number.POSITIVE_INFINITY;
  const queue = state.queue;
  for (;;) {
    let waiter: Waiter;
    if (queue.tenants.size === 0) {
      // No named tenant waits: tenant "" alone, in arrival order (never at a cap).
      if (queue.lineSize === 0) break;
      waiter = queue.line[queue.head] as Waiter;
      if (state.used + waiter.weight > Math.min(waiter.limit, state.idLimit)) break;
      queueDrop(queue, waiter);
      lineServed(queue);
    } else {
      const turn = queue.turns.first();
      if (turn === undefined) break;
      const [tenant, tag] = turn;
      waiter = queueHead(queue, tenant);
      if (tenantUsed(state, tenant) + waiter.weight > waiter.tenantLimit) {
        queue.turns.park(tenant);
        continue;
      }
      if (state.used + waiter.weight > Math.min(waiter.limit, state.idLimit)) break;
      queueDrop(queue, waiter);
      queueServed(queue, tenant, tag);
    }
    const { token, tenant } = waiter;
    const fence = fenceNext(state, now);
    const local = waiter.local;
    if (token === self) {
      state.selfHeld = holdersAdd(state, token, tenant, waiter.weight, now + selfLeaseMs);
      selfFence = fence;
    } else if (local !== undefined) {
      const held = holdersAdd(state, token, tenant, waiter.weight, now + local.leaseMs);
      // It only resolves a promise: told at once, nothing runs before this call ends.
      local.onGrant(now, fence, held);
    } else {
      holdersAdd(state, token, tenant, waiter.weight, waiter.expiresAt);
      granted ??= [];
      fences ??= [];
      granted.push(token);
      fences.push(fence);
      waiterLeaseMs = Math.min(waiterLeaseMs, waiter.expiresAt - now);
    }
  }
  if (granted !== undefined) {
    state.env.announce(state.key, {
      tokens: granted,
      fences: fences as number[],
      waiterLeaseMs: Math.max(1, Math.ceil(waiterLeaseMs)),
    });
  }
  return selfFence;
}
