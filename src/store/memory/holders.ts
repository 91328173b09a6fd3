import { untilMs } from "./clock.js";
import type { IdState } from "./state.js";

/** One lease on a semaphore id (in Redis: its token's members in the holders set, at its lease end). */
export interface Holder {
  readonly token: string;
  expiresAt: number;
  readonly weight: number;
  readonly tenant: string;
  /** Where it sits in its id's `holders` (-1 once removed): a handle's check and an O(1) removal. */
  slot: number;
}

/**
 * A semaphore id: its holders (lua/lib/holders.lua) beside what every id keeps.
 *
 * Why an array and not a Map by token: a token is a fresh 45-character
 * string, and V8 flattens and hashes a new string key over its whole length
 * (12% of an in-process acquire + release). The engine of this process keeps
 * the `Holder` it was given and hands it back on release and extend (see
 * `holdersOwn`), so its leases are never looked up by token. Lookups by token
 * alone (the Store contract, a re-sent acquire) go through `byToken`, an index
 * built on the first such lookup and kept while the id has holders.
 */
export interface SemaphoreState extends IdState {
  /** Every holder present, lapsed or not, in no particular order (a removal moves the last into its slot). */
  readonly holders: Holder[];
  /** Holders by token, once something looked one up by token alone among many; dropped when the id has none. */
  byToken: Map<string, Holder> | undefined;
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
  const holder: Holder = { token, expiresAt, weight, tenant, slot: state.holders.length };
  state.holders.push(holder);
  state.byToken?.set(token, holder);
  state.used += weight;
  if (tenant !== "") state.tenantUsed.set(tenant, (state.tenantUsed.get(tenant) ?? 0) + weight);
  if (expiresAt < state.earliest) state.earliest = expiresAt;
  return holder;
}

/** Up to this many holders, a lookup by token compares tokens (random: the first character mostly differs) rather than index them. */
const SCAN_MAX = 32;

/** `token`'s holder, looked up by token alone (among many, through the index, built on the first such lookup). */
export function holdersFind(state: SemaphoreState, token: string): Holder | undefined {
  let byToken = state.byToken;
  if (byToken === undefined) {
    if (state.holders.length <= SCAN_MAX) {
      for (const holder of state.holders) if (holder.token === token) return holder;
      return undefined;
    }
    byToken = new Map();
    for (const holder of state.holders) byToken.set(holder.token, holder);
    state.byToken = byToken;
  }
  return byToken.get(token);
}

/**
 * `token`'s holder: `held`, the record the engine kept from its acquire, when
 * it is still this id's and carries that very token (a stale or foreign
 * handle is not trusted: the token decides, as for any caller); else found by token.
 */
export function holdersOwn(state: SemaphoreState, token: string, held: unknown): Holder | undefined {
  if (held !== undefined) {
    const holder = held as Holder;
    if (state.holders[holder.slot] === holder && holder.token === token) return holder;
  }
  return holdersFind(state, token);
}

/** Moves a holder's lease end (an extend, or a re-sent acquire): pruning must see a shorter one. */
export function holdersTouch(state: SemaphoreState, holder: Holder, expiresAt: number): void {
  holder.expiresAt = expiresAt;
  if (expiresAt < state.earliest) state.earliest = expiresAt;
}

/** Takes a present holder away (its slot goes to the last one). */
export function holdersRemove(state: SemaphoreState, holder: Holder): void {
  const holders = state.holders;
  const last = holders.pop() as Holder;
  if (last !== holder) {
    holders[holder.slot] = last;
    last.slot = holder.slot;
  }
  holder.slot = -1;
  if (state.byToken !== undefined) {
    if (holders.length === 0) state.byToken = undefined;
    else state.byToken.delete(holder.token);
  }
  state.used -= holder.weight;
  if (holder.tenant !== "") {
    const left = (state.tenantUsed.get(holder.tenant) ?? 0) - holder.weight;
    if (left > 0) state.tenantUsed.set(holder.tenant, left);
    else state.tenantUsed.delete(holder.tenant);
    // Parked at its cap, the tenant may fit again (`tenant_unpark`).
    state.queue.turns.unpark(holder.tenant);
  }
  if (holders.length === 0) state.earliest = Number.POSITIVE_INFINITY;
}

/** Lapsed leases are reclaimed here rather than by a sweeper (lua: ZREMRANGEBYSCORE up to now). */
export function holdersPrune(state: SemaphoreState, now: number): void {
  if (state.earliest > now) return;
  let earliest = Number.POSITIVE_INFINITY;
  const holders = state.holders;
  // From the end: a removal moves the last holder, one already seen and kept, into the slot.
  for (let at = holders.length - 1; at >= 0; at--) {
    const holder = holders[at] as Holder;
    if (holder.expiresAt <= now) holdersRemove(state, holder);
    else if (holder.expiresAt < earliest) earliest = holder.expiresAt;
  }
  state.earliest = earliest;
}

/** Ms until the nearest live lease (of `tenant`, if given) ends, a reservation included: when a permit frees at the latest. */
export function holdersNext(state: SemaphoreState, now: number, tenant?: string): number {
  let nearest = Number.POSITIVE_INFINITY;
  for (const holder of state.holders) {
    if (holder.expiresAt > now && holder.expiresAt < nearest && (tenant === undefined || holder.tenant === tenant))
      nearest = holder.expiresAt;
  }
  return untilMs(nearest, now);
}

/** Permits held by a tenant. */
export function tenantUsed(state: SemaphoreState, tenant: string): number {
  return tenant === "" ? 0 : (state.tenantUsed.get(tenant) ?? 0);
}
