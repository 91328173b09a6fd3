import type { QueueOptions, TenantOptions } from "../contract/calls.js";
import type { AcquireReply, Inspection, SemaphoreCounts } from "../contract/types.js";
import { latestOf } from "./clock.js";
import { fenceNext } from "./fence.js";
import { grant } from "./grant.js";
import { holdRead } from "./hold.js";
import {
  type Holder,
  holdersAdd,
  holdersNext,
  holdersPrune,
  holdersRemove,
  holdersTouch,
  type SemaphoreState,
  tenantUsed,
} from "./holders.js";
import { type LocalJoin, queueDrop, queueInspect, queueJoin, queuePrune, queueTouch, queueWaiter } from "./queue.js";
import { settle } from "./settle.js";
import { Slots } from "./slots.js";
import { type Env, type IdState, idState, type Primitive } from "./state.js";

// A semaphore's steps, as lua/semaphore-*.lua take them.

export const semaphorePrimitive: Primitive<SemaphoreState> = {
  lapse: holdersPrune,
  grant: (state, now) => {
    grant(state, now);
  },
  next: (state, now) => holdersNext(state, now),
  latest: (state) => latestOf(state.holders.entries),
  // A held one gets a new fence, as a claim would (lua/semaphore-refresh-waiters.lua).
  heldFence: (state, token) => (state.holders.find(token) !== undefined ? fenceNext(state) : undefined),
  remove: (state, token, _now, held) => {
    const holder = state.holders.own(token, held);
    if (holder === undefined) return undefined;
    holdersRemove(state, holder);
    return holder.expiresAt;
  },
};

/** The id's state, made on its first use. */
export function semaphoreState(ids: Map<string, IdState>, env: Env, key: string): SemaphoreState {
  return idState(ids, env, key, (base) => ({
    ...base,
    holders: new Slots<Holder>(),
    selfHeld: undefined,
    used: 0,
    tenantUsed: new Map(),
    earliest: Number.POSITIVE_INFINITY,
    idLimit: 0,
  }));
}

/**
 * Prunes and grants the waiters that are due (lua/semaphore-acquire.lua);
 * then a newcomer is admitted at once exactly when it would be granted at once
 * had it joined the queue: it joins, the grants run in turn, and it holds a
 * full lease, or stays queued, or, failing fast, leaves. `local`, a waiter of
 * this process, joins without a waiter lease (see queue.ts). `fresh`, for a
 * token the engine of this process has just made, is its tenant ("" for
 * none): such a token holds nothing and waits nowhere yet, so the lookups of
 * a re-sent acquire (and the token's parse) are skipped.
 */
export function semaphoreAcquire(
  state: SemaphoreState,
  token: string,
  limit: number,
  weight: number,
  leaseMs: number,
  queue: QueueOptions | undefined,
  local: LocalJoin | undefined,
  tenantCall: TenantOptions | undefined,
  now: number,
  fresh?: string,
): AcquireReply {
  holdersPrune(state, now);
  if (state.queue.waiters.size > 0) {
    queuePrune(state.queue, now);
    // This caller's limit is now the id's limit as the store knows it, for the grants below.
    state.idLimit = limit;
    grant(state, now);
  }
  if (fresh === undefined) {
    const held = state.holders.find(token);
    if (held !== undefined) {
      // A re-sent acquire, or a waiter claiming its grant: refresh, never count twice (a new fence).
      holdersTouch(state, held, now + leaseMs);
      return settled(state, heldReply(fenceNext(state, now), held), now);
    }
    const waiter = state.queue.waiters.find(token);
    if (waiter !== undefined) {
      queueTouch(state.queue, waiter, now + (queue?.waiterLeaseMs ?? 0));
      return settled(state, { acquired: false, queued: true, retryAfterMs: holdersNext(state, now) }, now);
    }
  }
  const tenant = fresh ?? tenantOf(token);
  const tenantLimit = tenantCall?.limit ?? Number.POSITIVE_INFINITY;
  const fitsTenant = tenantUsed(state, tenant) + weight <= tenantLimit;
  // Nobody waits: the newcomer's turn is now.
  if (state.queue.waiters.size === 0 && state.used + weight <= limit && fitsTenant) {
    const holder = holdersAdd(state, token, tenant, weight, now + leaseMs);
    return settled(state, heldReply(fenceNext(state, now), holder), now);
  }
  const queueing = queue !== undefined || local !== undefined;
  if (queueing) {
    const maxQueue = queue?.maxQueue ?? local?.maxQueue ?? 0;
    const tenantMax = tenantCall?.maxQueue ?? 0;
    if (
      (maxQueue > 0 && state.queue.waiters.size >= maxQueue) ||
      (tenantMax > 0 && (state.queue.tenants.get(tenant)?.size ?? 0) >= tenantMax)
    ) {
      return settled(state, { acquired: false, queueFull: true, retryAfterMs: holdersNext(state, now) }, now);
    }
  }
  // Join (failing fast, only to see whether its turn is now), then grant in turn.
  const ends = queue !== undefined ? now + queue.waiterLeaseMs : now + 1;
  const waiter = queueWaiter(token, tenant, weight, limit, tenantLimit, ends, local);
  queueJoin(state.queue, token, waiter);
  state.idLimit = limit;
  const fence = grant(state, now, token, leaseMs);
  if (fence !== undefined) {
    const holder = state.selfHeld as Holder;
    state.selfHeld = undefined;
    return settled(state, heldReply(fence, holder), now);
  }
  if (queueing) return settled(state, { acquired: false, queued: true, retryAfterMs: holdersNext(state, now) }, now);
  queueDrop(state.queue, waiter);
  if (!fitsTenant)
    return settled(state, { acquired: false, tenantFull: true, retryAfterMs: holdersNext(state, now, tenant) }, now);
  return settled(state, { acquired: false, retryAfterMs: holdersNext(state, now) }, now);
}

/** An admission: the reply, with the holder's record for the engine to hand back (`AcquireReply.record`). */
function heldReply(fence: number, held: Holder): AcquireReply {
  return { acquired: true, retryAfterMs: 0, fence, record: held };
}

/** How an acquire ends: the id settled, and a refusal saying the typical hold. */
function settled(state: SemaphoreState, reply: AcquireReply, now: number): AcquireReply {
  settle(semaphorePrimitive, state);
  return holdRead(reply, state.hold, now);
}

/** Pushes a live lease's end to now + `leaseMs`; false unless it holds one (lua/semaphore-extend.lua). */
export function semaphoreExtend(state: SemaphoreState, token: string, leaseMs: number, now: number, handle?: unknown): boolean {
  const held = state.holders.own(token, handle);
  if (held === undefined || held.expiresAt <= now) return false;
  // An extend may shorten a lease below the recorded earliest expiry.
  holdersTouch(state, held, now + leaseMs);
  settle(semaphorePrimitive, state);
  return true;
}

/** The id's live figures, or one tenant's (lua/semaphore-stats.lua). */
export function semaphoreStats(state: SemaphoreState | undefined, now: number, tenant?: string): SemaphoreCounts {
  let used = 0;
  let holders = 0;
  let waiting = 0;
  const tenants = new Set<string>();
  for (const holder of state?.holders.entries ?? []) {
    if (holder.expiresAt <= now) continue;
    if (holder.tenant !== "") tenants.add(holder.tenant);
    if (tenant !== undefined && holder.tenant !== tenant) continue;
    used += holder.weight;
    holders++;
  }
  for (const waiter of state?.queue.waiters.entries ?? []) {
    if (waiter.expiresAt <= now) continue;
    if (waiter.tenant !== "") tenants.add(waiter.tenant);
    if (tenant === undefined || waiter.tenant === tenant) waiting++;
  }
  return tenant === undefined ? { used, holders, waiting, tenants: tenants.size } : { used, holders, waiting };
}

/** Live holders and waiters, in the order waiters will be served (lua/semaphore-inspect.lua). */
export function semaphoreInspect(state: SemaphoreState | undefined, now: number): Inspection {
  if (state === undefined) return { holders: [], waiters: [] };
  return {
    holders: state.holders.entries
      .filter((holder) => holder.expiresAt > now)
      .map(({ token, weight, expiresAt }) => ({ token, weight, expiresInMs: Math.ceil(expiresAt - now) })),
    waiters: queueInspect(state.queue, now),
  };
}

/** The tenant a lease token belongs to: what follows its first `@` (tokens are base64url: none of their own). "" for none. */
function tenantOf(token: string): string {
  const at = token.indexOf("@");
  return at < 0 ? "" : token.slice(at + 1);
}
