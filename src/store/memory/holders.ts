import { untilMs } from "./clock.js";
import type { Slots } from "./slots.js";
import type { IdState } from "./state.js";

/** One lease on a semaphore id (in Redis: its token's members in the holders set, at its lease end). */
export interface Holder {
  readonly token: string;
  expiresAt: number;
  readonly weight: number;
  readonly tenant: string;
  slot: number;
}

/**
 * A semaphore id: its holders (lua/lib/holders.lua) beside what every id
 * keeps. The engine of this process hands a holder's record back on release
 * and extend (`AcquireReply.record`), so its leases are never looked up by token
 * (see slots.ts).
 */
export interface SemaphoreState extends IdState {
  /** Every holder present, lapsed or not. */
  readonly holders: Slots<Holder>;
  /** The newcomer's holder when `grant` granted it (read and cleared by the acquire that called it). */
  selfHeld: Holder | undefined;
  /** Permits of every holder present, lapsed or not (as the members of the holders set in Redis). */
  used: number;
  /** The same, per tenant (the `:t` index in Redis); a tenant with none is not kept. */
  readonly tenantUsed: Map<string, number>;
  /** At most the earliest expiry among holders present: pruning is skipped until it passes. */
  earliest: number;
  /** The id's limit as the store knows it: that of the latest acquire that met or joined the queue. */
  idLimit: number;
}

/** `tenant`: the token's (`tenantOf`), which every caller already has. Returns the record, the engine's handle on it. */
export function holdersAdd(state: SemaphoreState, token: string, tenant: string, weight: number, expiresAt: number): Holder {
  const holder = state.holders.add({ token, expiresAt, weight, tenant, slot: 0 });
  state.used += weight;
  if (tenant !== "") state.tenantUsed.set(tenant, (state.tenantUsed.get(tenant) ?? 0) + weight);
  if (expiresAt < state.earliest) state.earliest = expiresAt;
  return holder;
}

/** Moves a holder's lease end (an extend, or a re-sent acquire): pruning must see a shorter one. */
export function holdersTouch(state: SemaphoreState, holder: Holder, expiresAt: number): void {
  holder.expiresAt = expiresAt;
  if (expiresAt < state.earliest) state.earliest = expiresAt;
}

/** Takes a holder away (one already gone counts nothing twice). */
export function holdersRemove(state: SemaphoreState, holder: Holder): void {
  if (!state.holders.remove(holder)) return;
  state.used -= holder.weight;
  if (holder.tenant !== "") {
    const left = (state.tenantUsed.get(holder.tenant) ?? 0) - holder.weight;
    if (left > 0) state.tenantUsed.set(holder.tenant, left);
    else state.tenantUsed.delete(holder.tenant);
    // Parked at its cap, the tenant may fit again (`tenant_unpark`).
    state.queue.turns.unpark(holder.tenant);
  }
  if (state.holders.size === 0) state.earliest = Number.POSITIVE_INFINITY;
}

/** Lapsed leases are reclaimed here rather than by a sweeper. */
export function holdersPrune(state: SemaphoreState, now: number): void {
  if (state.earliest > now) return;
  state.earliest = state.holders.prune(now, (holder) => holdersRemove(state, holder));
}

/** Ms until the nearest live lease (of `tenant`, if given) ends, a reservation included: when a permit frees at the latest. */
export function holdersNext(state: SemaphoreState, now: number, tenant?: string): number {
  let nearest = Number.POSITIVE_INFINITY;
  for (const holder of state.holders.entries) {
    if (holder.expiresAt > now && holder.expiresAt < nearest && (tenant === undefined || holder.tenant === tenant))
      nearest = holder.expiresAt;
  }
  return untilMs(nearest, now);
}

/** Permits held by a tenant. */
export function tenantUsed(state: SemaphoreState, tenant: string): number {
  return tenant === "" ? 0 : (state.tenantUsed.get(tenant) ?? 0);
}
