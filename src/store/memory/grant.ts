import { fenceNext } from "./fence.js";
import { holdersAdd, type SemaphoreState, tenantUsed } from "./holders.js";
import { type LocalWaiter, queueDrop, queueHead, queueServed } from "./queue.js";

/**
 * Grants in turn (lua/lib/grant.lua): over the waiting tenants in turn order,
 * a tenant at its cap is parked (it holds back nobody else, and is not read
 * again until it could fit: see turns.ts), and the first
 * whose next waiter does not fit the permits (its own limit and the id's)
 * stops the grants (nobody overtakes it). A grant reserves the permits until
 * the waiter's own lease ends; a waiter of this process gets its full lease
 * at once and is told directly; `self`, the newcomer of this very call, gets
 * a full lease of `selfLeaseMs` and is not announced. Each grant gets its
 * fence, in the order made; returns that of `self` when it was granted.
 * The caller ends with `settle` (settle.ts).
 */
export function grant(state: SemaphoreState, now: number, self?: string, selfLeaseMs = 0): number | undefined {
  let granted: string[] | undefined;
  let fences: number[] | undefined;
  let told: [LocalWaiter, number][] | undefined;
  let selfFence: number | undefined;
  let waiterLeaseMs = Number.POSITIVE_INFINITY;
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
    const fence = fenceNext(state, now);
    if (token === self) {
      holdersAdd(state, token, tenant, waiter.weight, now + selfLeaseMs);
      selfFence = fence;
    } else if (waiter.local !== undefined) {
      holdersAdd(state, token, tenant, waiter.weight, now + waiter.local.leaseMs);
      told ??= [];
      told.push([waiter.local, fence]);
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
  if (told !== undefined) for (const [local, fence] of told) local.onGrant(now, fence);
  return selfFence;
}
