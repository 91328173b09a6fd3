import { copyDue } from "../../runtime/copy-due.js";
import type { InProcessWaiter } from "../contract/calls.js";
import type { Inspection } from "../contract/types.js";
import { latestOf } from "./clock.js";
import { Slots } from "./slots.js";
import { Turns } from "./turns.js";

/** A caller in the waiting room. */
export interface Waiter {
  readonly token: string;
  /** False once it left the room (granted, dropped): the tenantless line skips it then (see `Queue.line`). */
  queued: boolean;
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
  local: InProcessWaiter | undefined;
  /** Its place in `Queue.waiters` (see slots.ts). */
  slot: number;
}

/** A waiter of the process the store lives in: a freed permit goes straight to it (`QueueOptions.waiter`). */
export type LocalJoin = InProcessWaiter;

/**
 * The waiting room (lua/lib/queue.lua): every waiter by token, each tenant's
 * waiters in arrival order, and the tag of each waiting tenant's next turn
 * (tenants are served in turn: see lua/lib/grant.lua). A lock's waiters are
 * all the tenant "". `earliest` is at most the earliest waiter lease end:
 * pruning waits until it passes.
 *
 * The tenantless waiters (tenant "") wait in `line`, an array with a moving
 * head, not in a Map of their own; and while no named tenant waits, their
 * turn's tag is kept in `lineTag` rather than in `turns`, so that an id
 * without tenants grants through one plain FIFO (no heap, no Map per turn).
 * When a named tenant joins, "" enters `turns` with that tag, and leaves it
 * again with the last named tenant: the order is the same either way.
 */
export interface Queue {
  /** Every waiter, by token without hashing it (slots.ts). */
  readonly waiters: Slots<Waiter>;
  /** The named tenants' lines (tenant "" waits in `line`): copied now and then (see runtime/copy-due.ts), read them from here each time. */
  readonly tenants: Map<string, Map<string, Waiter>>;
  /** Named tenants' waiters dropped since their lines were last copied. */
  dropped: number;
  readonly turns: Turns;
  /** The tag of the last turn served (`~v`). */
  virtual: number;
  earliest: number;
  /** Tenant ""'s waiters in arrival order from `head` on, with those that left since (`queued` false) not yet passed over. */
  line: Waiter[];
  head: number;
  /** Tenant ""'s waiters still queued. */
  lineSize: number;
  /** The tag of tenant ""'s next turn while it waits and no named tenant does (else it is in `turns`). */
  lineTag: number;
}

export const newQueue = (): Queue => ({
  waiters: new Slots<Waiter>(),
  tenants: new Map(),
  dropped: 0,
  turns: new Turns(),
  virtual: 0,
  earliest: Number.POSITIVE_INFINITY,
  line: [],
  head: 0,
  lineSize: 0,
  lineTag: 0,
});

/**
 * The waiter a call joins as: a remote caller's lease is its waiter lease
 * (`waiterLeaseMs`), refreshed by its process; a local one's is its wait's end.
 */
export function queueWaiter(
  token: string,
  tenant: string,
  weight: number,
  limit: number,
  tenantLimit: number,
  expiresAt: number,
  local: LocalJoin | undefined,
): Waiter {
  return {
    token,
    queued: true,
    tenant,
    weight,
    limit,
    tenantLimit,
    expiresAt: local !== undefined ? local.until : expiresAt,
    // Kept as given: a local wait is its own join (an object with methods), called as `local.onGrant(...)`.
    local,
    slot: 0,
  };
}

/** `token` leaves the room, if it waits there. */
export function queueLeave(queue: Queue, token: string): void {
  const waiter = queue.waiters.find(token);
  if (waiter !== undefined) queueDrop(queue, waiter);
}

/** A waiter leaves the room (one that already left is left alone). */
export function queueDrop(queue: Queue, waiter: Waiter): void {
  if (!waiter.queued) return;
  queue.waiters.remove(waiter);
  waiter.queued = false;
  if (waiter.tenant === "") {
    lineDrop(queue);
    return;
  }
  const copy = copyDue(++queue.dropped, queue.waiters.size);
  if (copy) queue.dropped = 0;
  const ofTenant = queue.tenants.get(waiter.tenant);
  ofTenant?.delete(waiter.token);
  if (ofTenant !== undefined && ofTenant.size === 0) {
    queue.tenants.delete(waiter.tenant);
    queue.turns.delete(waiter.tenant);
    // The last named tenant left: tenant "" goes back to its plain line, with its turn's tag.
    if (queue.tenants.size === 0 && queue.lineSize > 0) {
      queue.lineTag = queue.turns.tag("") as number;
      queue.turns.delete("");
    }
  } else {
    // A tenant's line lives while it has waiters: copied with the waiters, when its own drop is due.
    if (copy && ofTenant !== undefined) queue.tenants.set(waiter.tenant, new Map(ofTenant));
    // Its first waiter may have changed (another weight, another cap): it may fit now.
    queue.turns.unpark(waiter.tenant);
  }
}

/** A tenantless waiter left: pass over those that left at the head; reclaim the array's space now and then. */
function lineDrop(queue: Queue): void {
  const line = queue.line;
  if (--queue.lineSize === 0) {
    line.length = 0;
    queue.head = 0;
    if (queue.tenants.size > 0) queue.turns.delete("");
    return;
  }
  let head = queue.head;
  while (!(line[head] as Waiter).queued) line[head++] = undefined as unknown as Waiter;
  queue.head = head;
  // O(1) per drop: copied once the left ones (passed over or not) outnumber the queued ones, past a minimum.
  if (line.length - queue.lineSize > Math.max(256, queue.lineSize)) {
    queue.line = line.filter((waiter, at) => at >= head && waiter.queued);
    queue.head = 0;
  }
}

/** Waiters whose process stopped refreshing them (or whose wait ended) leave the queue. */
export function queuePrune(queue: Queue, now: number): void {
  if (queue.earliest > now) return;
  queue.earliest = queue.waiters.prune(now, (waiter) => queueDrop(queue, waiter));
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
    const waiter = queue.waiters.find(token);
    if (waiter !== undefined) queueTouch(queue, waiter, now + waiterLeaseMs);
  }
}

/** Joins at the end of its tenant's line; a tenant new to the queue takes the turn after the last one served. */
export function queueJoin(queue: Queue, token: string, waiter: Waiter): void {
  queue.waiters.add(waiter);
  if (waiter.expiresAt < queue.earliest) queue.earliest = waiter.expiresAt;
  if (waiter.tenant === "") {
    if (queue.lineSize++ === 0) {
      if (queue.tenants.size > 0) queue.turns.set("", queue.virtual + 1);
      else queue.lineTag = queue.virtual + 1;
    }
    queue.line.push(waiter);
    return;
  }
  let ofTenant = queue.tenants.get(waiter.tenant);
  if (ofTenant === undefined) {
    // The first named tenant: tenant "" takes its turn's tag into `turns`.
    if (queue.tenants.size === 0 && queue.lineSize > 0) queue.turns.set("", queue.lineTag);
    ofTenant = new Map();
    queue.tenants.set(waiter.tenant, ofTenant);
    queue.turns.set(waiter.tenant, queue.virtual + 1);
  }
  ofTenant.set(token, waiter);
}

/** The first waiter of a tenant's line. */
export function queueHead(queue: Queue, tenant: string): Waiter {
  if (tenant === "") return queue.line[queue.head] as Waiter;
  return (queue.tenants.get(tenant) as Map<string, Waiter>).values().next().value as Waiter;
}

/** A tenant's turn is served: the next is one tag on, if it still has waiters. */
export function queueServed(queue: Queue, tenant: string, tag: number): void {
  queue.virtual = tag;
  if (queue.turns.tag(tenant) !== undefined) queue.turns.set(tenant, tag + 1);
}

/** Tenant ""'s turn is served while no named tenant waits (the plain line: see `Queue`). */
export function lineServed(queue: Queue): void {
  queue.virtual = queue.lineTag;
  queue.lineTag++;
}

/** The latest waiter lease end (0: none). */
export function queueLatest(queue: Queue): number {
  return latestOf(queue.waiters.entries);
}

/** Live waiters in the order they will be served: tenants in turn, each tenant's in arrival order. */
export function queueInspect(queue: Queue, now: number): Inspection["waiters"] {
  const line = (tenant: string): Waiter[] =>
    tenant === ""
      ? queue.line.slice(queue.head).filter((waiter) => waiter.queued)
      : [...(queue.tenants.get(tenant) as Map<string, Waiter>).values()];
  return (queue.tenants.size === 0 ? [""] : queue.turns.inOrder())
    .flatMap(line)
    .filter((waiter) => waiter.expiresAt > now)
    .map((waiter) => ({ token: waiter.token, weight: waiter.weight, expiresInMs: Math.ceil(waiter.expiresAt - now) }));
}
