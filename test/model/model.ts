/**
 * The reference model of what a store must do: a plain state machine of one
 * semaphore id and one lock id, on an explicit clock. The model-based suite
 * drives it, the memory store and the Redis store with the same commands and
 * demands the same answers and the same state after every step. Where the
 * code and this file disagree, one of them is wrong: this file is the spec.
 *
 * The rules, in one place (SemaphoreModel says how tenants take turns):
 * - An entry (holder, reservation, waiter) is live while `now < expiresAt`.
 * - The id's limit "as the store knows it" is the limit of the latest
 *   acquire that met or joined the queue. A waiter is granted only while the
 *   permits held, its own included, fit within both its own limit and the
 *   id's, and its tenant's permits within its tenant's cap: a waiter that
 *   does not fit the id holds back those after it (strict order); one whose
 *   tenant is at its cap holds back nobody but its own tenant.
 * - A newcomer is admitted at once exactly when it would be granted at once
 *   had it joined the queue (so never past a waiter that comes first).
 * - A grant reserves the permits until the waiter's own lease ends (a dead
 *   waiter blocks for at most one waiter lease); the waiter's next acquire
 *   claims them with a full lease.
 * - Every grant has a fence: max(last + 1, now in µs), `last` being the id's
 *   previous fence, ever (the stores may forget it only once their clock has
 *   passed it, when the clock alone gives the same). A semaphore grants anew,
 *   with a new fence, when a holding token acquires again; a lock's holder
 *   keeps its fence.
 * - Every answer that does not acquire says the id's typical hold (`holdMs`,
 *   see `Hold`) while its record counts.
 */

/**
 * An id's typical hold: `avg` ms, counting while now < `until`. The release
 * of a live lease that says how long it was held writes it:
 * avg' = floor((4 avg + held + 2) / 5), or held alone when no record counts;
 * until' = min(the lease's end, now + max(1000, 4 avg')). A lock's record
 * lives in its key, which its holder's lease end takes with it: a lapse drops it.
 */
export interface Hold {
  avg: number;
  until: number;
}

const foldHold = (hold: Hold | undefined, now: number, ends: number, held: number): Hold => {
  const avg = hold !== undefined && hold.until > now ? Math.floor((4 * hold.avg + held + 2) / 5) : held;
  return { avg, until: Math.min(ends, now + Math.max(1000, 4 * avg)) };
};

/** The answer, with the typical hold when it did not acquire and a record counts. */
const answered = (answer: AcquireAnswer, hold: Hold | undefined, now: number): AcquireAnswer =>
  !answer.acquired && hold !== undefined && hold.until > now ? { ...answer, holdMs: Math.max(1, hold.avg) } : answer;

export interface ModelHolder {
  expiresAt: number;
  weight: number;
  /** The limit the holder was admitted (or granted) under. */
  limit: number;
  tenant: string;
}

export interface ModelWaiter {
  token: string;
  tenant: string;
  weight: number;
  limit: number;
  /** Its tenant's cap as its call passed it (Infinity: no tenant cap). */
  tenantLimit: number;
  /** Order within its tenant. */
  ticket: number;
  expiresAt: number;
  /**
   * A waiter of the memory store's own process (its `waitNow`): no waiter
   * lease to refresh (it stays until its wait ends, `expiresAt`), and a grant
   * gives it a full lease of this length at once, told rather than announced.
   */
  localLeaseMs?: number;
}

/** A grant to a waiter of the store's own process: who, when, and its fence. */
export interface Told {
  token: string;
  at: number;
  fence: number;
}

export interface AcquireAnswer {
  acquired: boolean;
  retryAfterMs: number;
  /** The grant's fence, when acquired. */
  fence?: number;
  queued?: boolean;
  queueFull?: boolean;
  /** Refused because the caller's tenant is at its cap (the id itself may have room). */
  tenantFull?: boolean;
  /** When not acquired: the id's typical hold, while its record counts. */
  holdMs?: number;
}

export interface Queueing {
  waiterLeaseMs: number;
  maxQueue: number;
}

/** A tenant's cap and queue bound, as one call passes them. */
export interface TenantCall {
  limit: number;
  maxQueue: number;
}

export interface RefreshAnswer {
  statuses: ("held" | "waiting" | "gone")[];
  /** The fence of each "held" token (a semaphore's new, a lock holder's own), 0 for the others. */
  fences: number[];
  retryAfterMs: number;
}

/** The tenant a token belongs to: what follows its first '@' ("" for none). */
export const tenantOf = (token: string): string => {
  const at = token.indexOf("@");
  return at < 0 ? "" : token.slice(at + 1);
};

/**
 * Tenant names in code point order: the order of their UTF-8 bytes, which is how Redis sorts members.
 * (JavaScript's `<` compares UTF-16 units: "\u{1F600}" before "\uE000", where Redis puts it after.)
 */
export const byCodePoint = (a: string, b: string): number => {
  for (let i = 0; i < a.length && i < b.length; i++) {
    const x = a.codePointAt(i) as number;
    const y = b.codePointAt(i) as number;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
};

/** The next fence of an id whose last was `last`, at `now` (ms): the stores' clocks in µs. */
const nextFence = (last: number, now: number): number => Math.max(last + 1, now * 1000);

/** Whole ms until `at`, at least 1; 1 when nothing is due. */
const until = (at: number | undefined, now: number): number => (at === undefined ? 1 : Math.max(1, at - now));

/**
 * A semaphore id. Its queue serves tenants in turn: each tenant's waiters in
 * the order they came (tickets), and the tenants by the tag of their next turn
 * (ties by name). A tenant whose first waiter joins an empty turn list of its
 * own gets the tag after the last turn served (`virtual`), and each turn it is
 * served moves it one tag on: round robin, and a newly arrived tenant is
 * served within one turn of the others. Callers that pass no tenant are the
 * tenant "" (plain FIFO when they are alone).
 *
 * A grant goes over the tenants in turn order: one at its cap is skipped (it
 * never holds back the others); the first whose next waiter does not fit the
 * id (its own limit and the id's) stops the grants (nobody overtakes it).
 *
 * A newcomer is admitted at once exactly when it would be granted right away
 * if it joined the queue: it joins, the grants run, and it holds (a full
 * lease) or, failing fast, leaves again (refused: "tenant-full" when its
 * tenant is at its cap, "full" otherwise).
 */
export class SemaphoreModel {
  readonly holders = new Map<string, ModelHolder>();
  queue: ModelWaiter[] = [];
  /** The tag of each waiting tenant's next turn. */
  readonly turns = new Map<string, number>();
  /** The tag of the last turn served. */
  virtual = 0;
  idLimit = 0;
  /** The last fence granted, ever. */
  fence = 0;
  hold: Hold | undefined;
  /** Every grant made, in order: what the stores must announce. */
  readonly grants: Announced[] = [];
  /** Every grant to a waiter of the store's own process, in order. */
  readonly told: Told[] = [];
  /** Admissions that broke a rule (the caller's limit, its tenant's cap): must stay empty. */
  readonly violations: string[] = [];

  used(tenant?: string): number {
    let used = 0;
    for (const holder of this.holders.values()) if (tenant === undefined || holder.tenant === tenant) used += holder.weight;
    return used;
  }

  nearest(now: number, tenant?: string): number {
    let at: number | undefined;
    for (const holder of this.holders.values()) {
      if (tenant !== undefined && holder.tenant !== tenant) continue;
      at = at === undefined ? holder.expiresAt : Math.min(at, holder.expiresAt);
    }
    return until(at, now);
  }

  #waitersOf(tenant: string): ModelWaiter[] {
    return this.queue.filter((w) => w.tenant === tenant).sort((a, b) => a.ticket - b.ticket);
  }

  #dropWaiter(token: string): void {
    const waiter = this.queue.find((w) => w.token === token);
    if (waiter === undefined) return;
    this.queue = this.queue.filter((w) => w !== waiter);
    if (!this.queue.some((w) => w.tenant === waiter.tenant)) this.turns.delete(waiter.tenant);
  }

  prune(now: number): void {
    for (const [token, holder] of this.holders) if (holder.expiresAt <= now) this.holders.delete(token);
    for (const waiter of [...this.queue]) if (waiter.expiresAt <= now) this.#dropWaiter(waiter.token);
  }

  #admit(token: string, holder: ModelHolder, cap: number, tenantCap: number): void {
    this.holders.set(token, holder);
    const used = this.used();
    if (used > cap) this.violations.push(`${token} admitted with ${used} held under limit ${cap}`);
    const tenantUsed = this.used(holder.tenant);
    if (tenantUsed > tenantCap)
      this.violations.push(`${token} admitted with ${tenantUsed} held by "${holder.tenant}" under ${tenantCap}`);
  }

  /** Tenants in turn order. */
  #inTurn(): string[] {
    return [...this.turns].sort((a, b) => a[1] - b[1] || byCodePoint(a[0], b[0])).map(([tenant]) => tenant);
  }

  /**
   * Grants in turn; `self`, the newcomer of this very call, gets a full lease of
   * `selfLeaseMs` rather than a reservation, and is not announced (its reply says it).
   */
  grant(now: number, self?: string, selfLeaseMs = 0): number | undefined {
    const granted: string[] = [];
    const fences: number[] = [];
    let selfFence: number | undefined;
    let waiterLeaseMs = Number.POSITIVE_INFINITY;
    let used = this.used();
    let i = 0;
    for (;;) {
      const order = this.#inTurn();
      const tenant = order[i];
      if (tenant === undefined) break;
      const head = this.#waitersOf(tenant)[0] as ModelWaiter;
      if (this.used(tenant) + head.weight > head.tenantLimit) {
        i++;
        continue;
      }
      const cap = Math.min(head.limit, this.idLimit);
      if (used + head.weight > cap) break;
      const tag = this.turns.get(tenant) as number;
      this.#dropWaiter(head.token);
      if (this.queue.some((w) => w.tenant === tenant)) this.turns.set(tenant, tag + 1);
      this.virtual = tag;
      used += head.weight;
      const holder = { weight: head.weight, limit: cap, tenant };
      const fence = this.#fence(now);
      if (head.token === self) {
        this.#admit(head.token, { ...holder, expiresAt: now + selfLeaseMs }, cap, head.tenantLimit);
        selfFence = fence;
      } else if (head.localLeaseMs !== undefined) {
        this.#admit(head.token, { ...holder, expiresAt: now + head.localLeaseMs }, cap, head.tenantLimit);
        this.told.push({ token: head.token, at: now, fence });
      } else {
        this.#admit(head.token, { ...holder, expiresAt: head.expiresAt }, cap, head.tenantLimit);
        granted.push(head.token);
        fences.push(fence);
        waiterLeaseMs = Math.min(waiterLeaseMs, head.expiresAt - now);
      }
      i = 0;
    }
    if (granted.length > 0) this.grants.push({ tokens: granted, fences, waiterLeaseMs });
    return selfFence;
  }

  #fence(now: number): number {
    this.fence = nextFence(this.fence, now);
    return this.fence;
  }

  acquire(
    now: number,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: Queueing,
    local?: { until: number; maxQueue: number },
    tenantCall?: TenantCall,
  ): AcquireAnswer {
    return answered(this.#acquire(now, token, limit, weight, leaseMs, queue, local, tenantCall), this.hold, now);
  }

  #acquire(
    now: number,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: Queueing,
    local?: { until: number; maxQueue: number },
    tenantCall?: TenantCall,
  ): AcquireAnswer {
    this.prune(now);
    if (this.queue.length > 0) {
      this.idLimit = limit;
      this.grant(now);
    }
    const held = this.holders.get(token);
    if (held !== undefined) {
      held.expiresAt = now + leaseMs;
      return { acquired: true, retryAfterMs: 0, fence: this.#fence(now) };
    }
    const waiter = this.queue.find((w) => w.token === token);
    if (waiter !== undefined) {
      if (waiter.localLeaseMs === undefined) waiter.expiresAt = now + (queue?.waiterLeaseMs ?? 0);
      return { acquired: false, queued: true, retryAfterMs: this.nearest(now) };
    }
    const tenant = tenantOf(token);
    const tenantLimit = tenantCall?.limit ?? Number.POSITIVE_INFINITY;
    const queueing = queue !== undefined || local !== undefined;
    // Nobody waits: the newcomer's turn is now (the same as joining and being granted at once).
    if (this.queue.length === 0 && this.used() + weight <= limit && this.used(tenant) + weight <= tenantLimit) {
      this.#admit(token, { expiresAt: now + leaseMs, weight, limit, tenant }, limit, tenantLimit);
      return { acquired: true, retryAfterMs: 0, fence: this.#fence(now) };
    }
    if (queueing) {
      const maxQueue = queue?.maxQueue ?? local?.maxQueue ?? 0;
      const full = maxQueue > 0 && this.queue.length >= maxQueue;
      const tenantMax = tenantCall?.maxQueue ?? 0;
      if (full || (tenantMax > 0 && this.#waitersOf(tenant).length >= tenantMax)) {
        return { acquired: false, queueFull: true, retryAfterMs: this.nearest(now) };
      }
    }
    // Join (for a caller failing fast, only to see whether its turn is now), then grant in turn.
    const last = this.#waitersOf(tenant).at(-1);
    const expiresAt = queue !== undefined ? now + queue.waiterLeaseMs : local !== undefined ? local.until : now + 1;
    this.queue.push({
      token,
      tenant,
      weight,
      limit,
      tenantLimit,
      ticket: (last?.ticket ?? 0) + 1,
      expiresAt,
      ...(local !== undefined ? { localLeaseMs: leaseMs } : {}),
    });
    if (!this.turns.has(tenant)) this.turns.set(tenant, this.virtual + 1);
    this.idLimit = limit;
    const fence = this.grant(now, token, leaseMs);
    if (fence !== undefined) return { acquired: true, retryAfterMs: 0, fence };
    if (queueing) return { acquired: false, queued: true, retryAfterMs: this.nearest(now) };
    this.#dropWaiter(token);
    if (this.used(tenant) + weight > tenantLimit) {
      return { acquired: false, tenantFull: true, retryAfterMs: this.nearest(now, tenant) };
    }
    return { acquired: false, retryAfterMs: this.nearest(now) };
  }

  extend(now: number, token: string, leaseMs: number): boolean {
    const held = this.holders.get(token);
    if (held === undefined || held.expiresAt <= now) return false;
    held.expiresAt = now + leaseMs;
    return true;
  }

  release(now: number, token: string, heldMs?: number): boolean {
    const held = this.holders.get(token);
    const live = held !== undefined && held.expiresAt > now;
    if (live && heldMs !== undefined) this.hold = foldHold(this.hold, now, held.expiresAt, heldMs);
    this.holders.delete(token);
    this.prune(now);
    if (this.queue.length > 0) this.grant(now);
    return live;
  }

  leave(now: number, token: string): void {
    this.holders.delete(token);
    this.#dropWaiter(token);
    this.prune(now);
    if (this.queue.length > 0) this.grant(now);
  }

  refresh(now: number, tokens: readonly string[], waiterLeaseMs: number): RefreshAnswer {
    // A waiter whose lease lapsed is gone, even if its process is back.
    this.prune(now);
    for (const waiter of this.queue) {
      if (tokens.includes(waiter.token) && waiter.localLeaseMs === undefined) waiter.expiresAt = now + waiterLeaseMs;
    }
    if (this.queue.length > 0) this.grant(now);
    const statuses = tokens.map((token) =>
      this.holders.has(token) ? "held" : this.queue.some((w) => w.token === token) ? "waiting" : "gone",
    ) satisfies RefreshAnswer["statuses"];
    return {
      statuses,
      fences: statuses.map((status) => (status === "held" ? this.#fence(now) : 0)),
      retryAfterMs: this.nearest(now),
    };
  }

  /** Figures of the id, or of one tenant of it. */
  stats(now: number, tenant?: string): { used: number; holders: number; waiting: number; tenants?: number } {
    let used = 0;
    let holders = 0;
    const tenants = new Set<string>();
    for (const holder of this.holders.values()) {
      if (holder.expiresAt <= now) continue;
      if (holder.tenant !== "") tenants.add(holder.tenant);
      if (tenant !== undefined && holder.tenant !== tenant) continue;
      used += holder.weight;
      holders++;
    }
    let waiting = 0;
    for (const waiter of this.queue) {
      if (waiter.expiresAt <= now) continue;
      if (waiter.tenant !== "") tenants.add(waiter.tenant);
      if (tenant === undefined || waiter.tenant === tenant) waiting++;
    }
    return tenant === undefined ? { used, holders, waiting, tenants: tenants.size } : { used, holders, waiting };
  }

  /** Live holders and waiters as a store's inspection reports them (waiters in turn order, then ticket). */
  inspect(now: number): Inspection {
    const turn = new Map(this.#inTurn().map((tenant, i) => [tenant, i]));
    return {
      holders: [...this.holders]
        .filter(([, h]) => h.expiresAt > now)
        .map(([token, h]) => ({ token, weight: h.weight, expiresInMs: h.expiresAt - now }))
        .sort(byToken),
      waiters: this.queue
        .filter((w) => w.expiresAt > now)
        .sort((a, b) => (turn.get(a.tenant) ?? 0) - (turn.get(b.tenant) ?? 0) || a.ticket - b.ticket)
        .map((w) => ({ token: w.token, weight: w.weight, expiresInMs: w.expiresAt - now })),
    };
  }

  /** Until when the typical hold counts (no key of the id may lapse before), if it does. */
  holdUntil(now: number): number | undefined {
    return this.hold !== undefined && this.hold.until > now ? this.hold.until : undefined;
  }

  /** The latest end among live entries: no key of the id may lapse before it. */
  latest(now: number): { holders: number | undefined; waiters: number | undefined } {
    let holders: number | undefined;
    for (const holder of this.holders.values()) {
      if (holder.expiresAt > now) holders = Math.max(holders ?? 0, holder.expiresAt);
    }
    let waiters: number | undefined;
    for (const waiter of this.queue) if (waiter.expiresAt > now) waiters = Math.max(waiters ?? 0, waiter.expiresAt);
    return { holders, waiters };
  }
}

export class LockModel {
  holder: { token: string; expiresAt: number; fence: number } | undefined;
  /** The last fence granted, ever. */
  fence = 0;
  hold: Hold | undefined;
  queue: ModelWaiter[] = [];
  readonly grants: Announced[] = [];
  readonly told: Told[] = [];

  #lockWaiter(token: string): Omit<ModelWaiter, "expiresAt"> {
    const ticket = (this.queue.at(-1)?.ticket ?? 0) + 1;
    return { token, tenant: "", weight: 1, limit: 1, tenantLimit: Number.POSITIVE_INFINITY, ticket };
  }

  #settle(now: number): void {
    if (this.holder !== undefined && this.holder.expiresAt <= now) {
      this.holder = undefined;
      this.hold = undefined;
    }
    this.queue = this.queue.filter((waiter) => waiter.expiresAt > now);
  }

  #grant(now: number): void {
    if (this.holder !== undefined) return;
    const head = this.queue.shift();
    if (head === undefined) return;
    const fence = this.#fence(now);
    if (head.localLeaseMs !== undefined) {
      this.holder = { token: head.token, expiresAt: now + head.localLeaseMs, fence };
      this.told.push({ token: head.token, at: now, fence });
      return;
    }
    this.holder = { token: head.token, expiresAt: head.expiresAt, fence };
    this.grants.push({ tokens: [head.token], fences: [fence], waiterLeaseMs: head.expiresAt - now });
  }

  #fence(now: number): number {
    this.fence = nextFence(this.fence, now);
    return this.fence;
  }

  #retryAfter(now: number): number {
    return until(this.holder?.expiresAt, now);
  }

  acquire(
    now: number,
    token: string,
    ttlMs: number,
    queue?: Queueing,
    local?: { until: number; maxQueue: number },
  ): AcquireAnswer {
    this.#settle(now);
    return answered(this.#acquire(now, token, ttlMs, queue, local), this.hold, now);
  }

  #acquire(
    now: number,
    token: string,
    ttlMs: number,
    queue?: Queueing,
    local?: { until: number; maxQueue: number },
  ): AcquireAnswer {
    this.#grant(now);
    if (this.holder?.token === token) {
      this.holder.expiresAt = now + ttlMs;
      return { acquired: true, retryAfterMs: 0, fence: this.holder.fence };
    }
    const waiter = this.queue.find((w) => w.token === token);
    if (waiter !== undefined) {
      if (waiter.localLeaseMs === undefined) waiter.expiresAt = now + (queue?.waiterLeaseMs ?? 0);
      return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
    }
    if (this.holder === undefined && this.queue.length === 0) {
      const fence = this.#fence(now);
      this.holder = { token, expiresAt: now + ttlMs, fence };
      return { acquired: true, retryAfterMs: 0, fence };
    }
    if (local !== undefined) {
      if (local.maxQueue > 0 && this.queue.length >= local.maxQueue) {
        return { acquired: false, queueFull: true, retryAfterMs: this.#retryAfter(now) };
      }
      this.queue.push({ ...this.#lockWaiter(token), expiresAt: local.until, localLeaseMs: ttlMs });
      return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
    }
    if (queue === undefined) return { acquired: false, retryAfterMs: this.#retryAfter(now) };
    if (queue.maxQueue > 0 && this.queue.length >= queue.maxQueue) {
      return { acquired: false, queueFull: true, retryAfterMs: this.#retryAfter(now) };
    }
    this.queue.push({ ...this.#lockWaiter(token), expiresAt: now + queue.waiterLeaseMs });
    return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
  }

  extend(now: number, token: string, ttlMs: number): boolean {
    this.#settle(now);
    if (this.holder?.token !== token) return false;
    this.holder.expiresAt = now + ttlMs;
    return true;
  }

  release(now: number, token: string, heldMs?: number): boolean {
    this.#settle(now);
    const ours = this.holder?.token === token;
    if (ours && heldMs !== undefined) this.hold = foldHold(this.hold, now, this.holder?.expiresAt as number, heldMs);
    if (ours) this.holder = undefined;
    this.#grant(now);
    return ours;
  }

  leave(now: number, token: string): void {
    this.#settle(now);
    if (this.holder?.token === token) this.holder = undefined;
    this.queue = this.queue.filter((w) => w.token !== token);
    this.#grant(now);
  }

  refresh(now: number, tokens: readonly string[], waiterLeaseMs: number): RefreshAnswer {
    this.#settle(now);
    for (const waiter of this.queue) {
      if (tokens.includes(waiter.token) && waiter.localLeaseMs === undefined) waiter.expiresAt = now + waiterLeaseMs;
    }
    this.#grant(now);
    return {
      statuses: tokens.map((token) =>
        this.holder?.token === token ? "held" : this.queue.some((w) => w.token === token) ? "waiting" : "gone",
      ),
      fences: tokens.map((token) => (this.holder?.token === token ? this.holder.fence : 0)),
      retryAfterMs: this.#retryAfter(now),
    };
  }

  /**
   * Until when the lock's key must last for its typical hold, if it counts:
   * while held, the key is the lease (its end takes the hold with it).
   */
  holdUntil(now: number): number | undefined {
    if (this.hold === undefined || this.hold.until <= now) return undefined;
    if (this.holder === undefined) return this.hold.until;
    return this.holder.expiresAt > now ? Math.min(this.hold.until, this.holder.expiresAt) : undefined;
  }

  stats(now: number): { held: boolean; expiresInMs: number } {
    if (this.holder === undefined || this.holder.expiresAt <= now) return { held: false, expiresInMs: 0 };
    return { held: true, expiresInMs: this.holder.expiresAt - now };
  }

  inspect(now: number): Inspection {
    const live = this.holder !== undefined && this.holder.expiresAt > now ? [this.holder] : [];
    return {
      holders: live.map((h) => ({ token: h.token, weight: 1, expiresInMs: h.expiresAt - now })),
      waiters: this.queue
        .filter((w) => w.expiresAt > now)
        .map((w) => ({ token: w.token, weight: 1, expiresInMs: w.expiresAt - now })),
    };
  }
}

/** A grant as a store announces it: the tokens, their fences, and the shortest of their reservations in ms. */
export interface Announced {
  tokens: string[];
  fences: number[];
  waiterLeaseMs: number;
}

export interface Inspection {
  holders: { token: string; weight: number; expiresInMs: number }[];
  waiters: { token: string; weight: number; expiresInMs: number }[];
}

const byToken = (a: { token: string }, b: { token: string }): number => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0);
