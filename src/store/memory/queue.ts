import { copyDue } from "../../churn.js";
import type { Inspection } from "../types.js";
import { latestOf, pruneLapsed } from "./clock.js";
import { Turns } from "./turns.js";

/** A caller in the waiting room. */
export interface Waiter {
  tenant: string;
  weight: number;
  /** The limit its call passed: it is granted only within it. */
  limit: number;
  /** Its tenant's cap as its call passed it (Infinity: none). */
  tenantLimit: number;
  /**
   * Its waiter lease; a grant reserves its permits until then. A waiter of
   * this process (`local`) has none to refresh: it stays until its wait ends.
   */
  expiresAt: number;
  /** A waiter of this process: granted, it holds a full lease at once and is told here. */
  local: LocalWaiter | undefined;
}

/** A waiter of the process the store lives in: a freed permit goes straight to it. */
export interface LocalWaiter {
  leaseMs: number;
  /** Called (synchronously, from the call that freed the permit) with the grant's time and fence; it must only resolve a promise. */
  onGrant(at: number, fence: number): void;
  /** Called when the store closes while it waits (nothing will free a permit for it any more); it must only reject a promise. */
  onClose(error: Error): void;
}

/** What a local wait joins with: the wait's end stands for the waiter lease. */
export interface LocalJoin extends LocalWaiter {
  until: number;
  maxQueue: number;
}

/**
 * The waiting room (lua/lib/queue.lua): every waiter by token, each tenant's
 * waiters in arrival order, and the tag of each waiting tenant's next turn
 * (tenants are served in turn: see lua/lib/grant.lua). A lock's waiters are
 * all the tenant "". `earliest` is at most the earliest waiter lease end:
 * pruning waits until it passes.
 */
export interface Queue {
  /** Copied now and then, as each tenant's line (see churn.ts): read them from the queue each time. */
  waiters: Map<string, Waiter>;
  readonly tenants: Map<string, Map<string, Waiter>>;
  /** Waiters dropped since `waiters` was last copied. */
  dropped: number;
  readonly turns: Turns;
  /** The tag of the last turn served (`~v`). */
  virtual: number;
  earliest: number;
}

export const newQueue = (): Queue => ({
  waiters: new Map(),
  tenants: new Map(),
  dropped: 0,
  turns: new Turns(),
  virtual: 0,
  earliest: Number.POSITIVE_INFINITY,
});

/**
 * The waiter a call joins as: a remote caller's lease is its waiter lease
 * (`waiterLeaseMs`), refreshed by its process; a local one's is its wait's end.
 */
export function queueWaiter(
  tenant: string,
  weight: number,
  limit: number,
  tenantLimit: number,
  expiresAt: number,
  local: LocalJoin | undefined,
): Waiter {
  return {
    tenant,
    weight,
    limit,
    tenantLimit,
    expiresAt: local !== undefined ? local.until : expiresAt,
    // Kept as given: a local wait is its own join (an object with methods), called as `local.onGrant(...)`.
    local,
  };
}

export function queueDrop(queue: Queue, token: string): void {
  const waiter = queue.waiters.get(token);
  if (waiter === undefined) return;
  queue.waiters.delete(token);
  const copy = copyDue(++queue.dropped, queue.waiters.size);
  if (copy) {
    queue.dropped = 0;
    queue.waiters = new Map(queue.waiters);
  }
  const ofTenant = queue.tenants.get(waiter.tenant);
  ofTenant?.delete(token);
  if (ofTenant !== undefined && ofTenant.size === 0) {
    queue.tenants.delete(waiter.tenant);
    queue.turns.delete(waiter.tenant);
  } else {
    // A tenant's line lives while it has waiters: copied with the waiters, when its own drop is due.
    if (copy && ofTenant !== undefined) queue.tenants.set(waiter.tenant, new Map(ofTenant));
    // Its first waiter may have changed (another weight, another cap): it may fit now.
    queue.turns.unpark(waiter.tenant);
  }
}

/** Waiters whose process stopped refreshing them (or whose wait ended) leave the queue. */
export function queuePrune(queue: Queue, now: number): void {
  if (queue.earliest > now) return;
  queue.earliest = pruneLapsed(queue.waiters, now, (token) => queueDrop(queue, token));
}

/** Moves a waiter's lease end (a shorter waiter lease can bring it forward: pruning must see that). */
export function queueTouch(queue: Queue, waiter: Waiter, expiresAt: number): void {
  if (waiter.local !== undefined) return;
  waiter.expiresAt = expiresAt;
  if (expiresAt < queue.earliest) queue.earliest = expiresAt;
}

/** Keeps the waiter leases of these tokens (those still queued) for `waiterLeaseMs` more. */
export function queueRefresh(queue: Queue, tokens: readonly string[], waiterLeaseMs: number, now: number): void {
  for (const token of tokens) {
    const waiter = queue.waiters.get(token);
    if (waiter !== undefined) queueTouch(queue, waiter, now + waiterLeaseMs);
  }
}

/** Joins at the end of its tenant's line; a tenant new to the queue takes the turn after the last one served. */
export function queueJoin(queue: Queue, token: string, waiter: Waiter): void {
  queue.waiters.set(token, waiter);
  let ofTenant = queue.tenants.get(waiter.tenant);
  if (ofTenant === undefined) {
    ofTenant = new Map();
    queue.tenants.set(waiter.tenant, ofTenant);
    queue.turns.set(waiter.tenant, queue.virtual + 1);
  }
  ofTenant.set(token, waiter);
  if (waiter.expiresAt < queue.earliest) queue.earliest = waiter.expiresAt;
}

/** The first waiter of a tenant's line. */
export function queueHead(queue: Queue, tenant: string): [string, Waiter] {
  return (queue.tenants.get(tenant) as Map<string, Waiter>).entries().next().value as [string, Waiter];
}

/** A tenant's turn is served: the next is one tag on, if it still has waiters. */
export function queueServed(queue: Queue, tenant: string, tag: number): void {
  queue.virtual = tag;
  if (queue.turns.tag(tenant) !== undefined) queue.turns.set(tenant, tag + 1);
}

/** The latest waiter lease end (0: none). */
export function queueLatest(queue: Queue): number {
  return latestOf(queue.waiters.values());
}

/** Live waiters in the order they will be served: tenants in turn, each tenant's in arrival order. */
export function queueInspect(queue: Queue, now: number): Inspection["waiters"] {
  return queue.turns
    .inOrder()
    .flatMap((tenant) => [...(queue.tenants.get(tenant) as Map<string, Waiter>)])
    .filter(([, waiter]) => waiter.expiresAt > now)
    .map(([token, waiter]) => ({ token, weight: waiter.weight, expiresInMs: Math.ceil(waiter.expiresAt - now) }));
}
