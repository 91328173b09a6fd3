/**
 * The reference model of what a store must do: a plain state machine of one
 * semaphore id and one lock id, on an explicit clock. The model-based suite
 * drives it, the memory store and the Redis store with the same commands and
 * demands the same answers and the same state after every step. Where the
 * code and this file disagree, one of them is wrong: this file is the spec.
 *
 * The rules, in one place:
 * - An entry (holder, reservation, waiter) is live while `now < expiresAt`.
 * - A newcomer is admitted only when nobody waits and the permits held, its
 *   own included, fit within the limit its call passed.
 * - The id's limit "as the store knows it" is the limit of the latest
 *   acquire that met or joined the queue. A waiter is granted, in ticket
 *   order, only while the permits held, its own included, fit within both
 *   its own limit and the id's: a waiter that does not fit holds back those
 *   behind it (strict order).
 * - A grant reserves the permits until the waiter's own lease ends (a dead
 *   waiter blocks for at most one waiter lease); the waiter's next acquire
 *   claims them with a full lease.
 */

export interface ModelHolder {
  expiresAt: number;
  weight: number;
  /** The limit the holder was admitted (or granted) under. */
  limit: number;
}

export interface ModelWaiter {
  token: string;
  weight: number;
  limit: number;
  expiresAt: number;
  /**
   * A waiter of the memory store's own process (its `waitNow`): no waiter
   * lease to refresh (it stays until its wait ends, `expiresAt`), and a grant
   * gives it a full lease of this length at once, told rather than announced.
   */
  localLeaseMs?: number;
}

/** A grant to a waiter of the store's own process: who, and when. */
export interface Told {
  token: string;
  at: number;
}

export interface AcquireAnswer {
  acquired: boolean;
  retryAfterMs: number;
  queued?: boolean;
  queueFull?: boolean;
}

export interface Queueing {
  claimMs: number;
  maxQueue: number;
}

export interface RefreshAnswer {
  statuses: ("held" | "waiting" | "gone")[];
  retryAfterMs: number;
}

/** Whole ms until `at`, at least 1; 1 when nothing is due. */
const until = (at: number | undefined, now: number): number => (at === undefined ? 1 : Math.max(1, at - now));

export class SemaphoreModel {
  readonly holders = new Map<string, ModelHolder>();
  /** In ticket order. */
  queue: ModelWaiter[] = [];
  idLimit = 0;
  /** Every grant made, in order: what the stores must announce. */
  readonly grants: Announced[] = [];
  /** Every grant to a waiter of the store's own process, in order. */
  readonly told: Told[] = [];
  /** Admissions that broke the rule "held, own included, within the caller's limit": must stay empty. */
  readonly violations: string[] = [];

  used(): number {
    let used = 0;
    for (const holder of this.holders.values()) used += holder.weight;
    return used;
  }

  nearest(now: number): number {
    let at: number | undefined;
    for (const holder of this.holders.values()) at = at === undefined ? holder.expiresAt : Math.min(at, holder.expiresAt);
    return until(at, now);
  }

  prune(now: number): void {
    for (const [token, holder] of this.holders) if (holder.expiresAt <= now) this.holders.delete(token);
    this.queue = this.queue.filter((waiter) => waiter.expiresAt > now);
  }

  #admit(token: string, holder: ModelHolder, cap: number): void {
    this.holders.set(token, holder);
    const used = this.used();
    if (used > cap) this.violations.push(`${token} admitted with ${used} held under limit ${cap}`);
  }

  grant(now: number): string[] {
    const granted: string[] = [];
    let reservedMs = Number.POSITIVE_INFINITY;
    let used = this.used();
    while (this.queue.length > 0) {
      const head = this.queue[0] as ModelWaiter;
      const cap = Math.min(head.limit, this.idLimit);
      if (used + head.weight > cap) break;
      this.queue.shift();
      used += head.weight;
      if (head.localLeaseMs !== undefined) {
        this.#admit(head.token, { expiresAt: now + head.localLeaseMs, weight: head.weight, limit: cap }, cap);
        this.told.push({ token: head.token, at: now });
        continue;
      }
      this.#admit(head.token, { expiresAt: head.expiresAt, weight: head.weight, limit: cap }, cap);
      granted.push(head.token);
      reservedMs = Math.min(reservedMs, head.expiresAt - now);
    }
    if (granted.length > 0) this.grants.push({ tokens: granted, reservedMs });
    return granted;
  }

  acquire(
    now: number,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: Queueing,
    local?: { until: number; maxQueue: number },
  ): AcquireAnswer {
    this.prune(now);
    if (this.queue.length > 0) {
      this.idLimit = limit;
      this.grant(now);
    }
    const held = this.holders.get(token);
    if (held !== undefined) {
      held.expiresAt = now + leaseMs;
      return { acquired: true, retryAfterMs: 0 };
    }
    const waiter = this.queue.find((w) => w.token === token);
    if (waiter !== undefined) {
      if (waiter.localLeaseMs === undefined) waiter.expiresAt = now + (queue?.claimMs ?? 0);
      return { acquired: false, queued: true, retryAfterMs: this.nearest(now) };
    }
    if (this.queue.length === 0 && this.used() + weight <= limit) {
      this.#admit(token, { expiresAt: now + leaseMs, weight, limit }, limit);
      return { acquired: true, retryAfterMs: 0 };
    }
    if (local !== undefined) {
      if (local.maxQueue > 0 && this.queue.length >= local.maxQueue) {
        return { acquired: false, queueFull: true, retryAfterMs: this.nearest(now) };
      }
      this.queue.push({ token, weight, limit, expiresAt: local.until, localLeaseMs: leaseMs });
      this.idLimit = limit;
      return { acquired: false, queued: true, retryAfterMs: this.nearest(now) };
    }
    if (queue === undefined) return { acquired: false, retryAfterMs: this.nearest(now) };
    if (queue.maxQueue > 0 && this.queue.length >= queue.maxQueue) {
      return { acquired: false, queueFull: true, retryAfterMs: this.nearest(now) };
    }
    this.queue.push({ token, weight, limit, expiresAt: now + queue.claimMs });
    this.idLimit = limit;
    return { acquired: false, queued: true, retryAfterMs: this.nearest(now) };
  }

  extend(now: number, token: string, leaseMs: number): boolean {
    const held = this.holders.get(token);
    if (held === undefined || held.expiresAt <= now) return false;
    held.expiresAt = now + leaseMs;
    return true;
  }

  release(now: number, token: string): boolean {
    const held = this.holders.get(token);
    this.holders.delete(token);
    this.prune(now);
    if (this.queue.length > 0) this.grant(now);
    return held !== undefined && held.expiresAt > now;
  }

  leave(now: number, token: string): void {
    this.holders.delete(token);
    this.queue = this.queue.filter((w) => w.token !== token);
    this.prune(now);
    if (this.queue.length > 0) this.grant(now);
  }

  refresh(now: number, tokens: readonly string[], claimMs: number): RefreshAnswer {
    // A waiter whose lease lapsed is gone, even if its process is back.
    this.prune(now);
    for (const waiter of this.queue) {
      if (tokens.includes(waiter.token) && waiter.localLeaseMs === undefined) waiter.expiresAt = now + claimMs;
    }
    if (this.queue.length > 0) this.grant(now);
    return {
      statuses: tokens.map((token) =>
        this.holders.has(token) ? "held" : this.queue.some((w) => w.token === token) ? "waiting" : "gone",
      ),
      retryAfterMs: this.nearest(now),
    };
  }

  stats(now: number): { used: number; holders: number; waiting: number } {
    let used = 0;
    let holders = 0;
    for (const holder of this.holders.values()) {
      if (holder.expiresAt <= now) continue;
      used += holder.weight;
      holders++;
    }
    return { used, holders, waiting: this.queue.filter((w) => w.expiresAt > now).length };
  }

  /** Live holders and waiters as a store's inspection reports them. */
  inspect(now: number): Inspection {
    return {
      holders: [...this.holders]
        .filter(([, h]) => h.expiresAt > now)
        .map(([token, h]) => ({ token, weight: h.weight, expiresInMs: h.expiresAt - now }))
        .sort(byToken),
      waiters: this.queue
        .filter((w) => w.expiresAt > now)
        .map((w) => ({ token: w.token, weight: w.weight, expiresInMs: w.expiresAt - now })),
    };
  }

  /** The latest end among live entries: no key of the id may lapse before it. */
  latest(now: number): { holders: number | undefined; heavy: number | undefined; waiters: number | undefined } {
    let holders: number | undefined;
    let heavy: number | undefined;
    for (const holder of this.holders.values()) {
      if (holder.expiresAt <= now) continue;
      holders = Math.max(holders ?? 0, holder.expiresAt);
      if (holder.weight > 1) heavy = Math.max(heavy ?? 0, holder.expiresAt);
    }
    let waiters: number | undefined;
    for (const waiter of this.queue) if (waiter.expiresAt > now) waiters = Math.max(waiters ?? 0, waiter.expiresAt);
    return { holders, heavy, waiters };
  }
}

export class LockModel {
  holder: { token: string; expiresAt: number } | undefined;
  queue: ModelWaiter[] = [];
  readonly grants: Announced[] = [];
  readonly told: Told[] = [];

  #settle(now: number): void {
    if (this.holder !== undefined && this.holder.expiresAt <= now) this.holder = undefined;
    this.queue = this.queue.filter((waiter) => waiter.expiresAt > now);
  }

  #grant(now: number): void {
    if (this.holder !== undefined) return;
    const head = this.queue.shift();
    if (head === undefined) return;
    if (head.localLeaseMs !== undefined) {
      this.holder = { token: head.token, expiresAt: now + head.localLeaseMs };
      this.told.push({ token: head.token, at: now });
      return;
    }
    this.holder = { token: head.token, expiresAt: head.expiresAt };
    this.grants.push({ tokens: [head.token], reservedMs: head.expiresAt - now });
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
    this.#grant(now);
    if (this.holder?.token === token) {
      this.holder.expiresAt = now + ttlMs;
      return { acquired: true, retryAfterMs: 0 };
    }
    const waiter = this.queue.find((w) => w.token === token);
    if (waiter !== undefined) {
      if (waiter.localLeaseMs === undefined) waiter.expiresAt = now + (queue?.claimMs ?? 0);
      return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
    }
    if (this.holder === undefined && this.queue.length === 0) {
      this.holder = { token, expiresAt: now + ttlMs };
      return { acquired: true, retryAfterMs: 0 };
    }
    if (local !== undefined) {
      if (local.maxQueue > 0 && this.queue.length >= local.maxQueue) {
        return { acquired: false, queueFull: true, retryAfterMs: this.#retryAfter(now) };
      }
      this.queue.push({ token, weight: 1, limit: 1, expiresAt: local.until, localLeaseMs: ttlMs });
      return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
    }
    if (queue === undefined) return { acquired: false, retryAfterMs: this.#retryAfter(now) };
    if (queue.maxQueue > 0 && this.queue.length >= queue.maxQueue) {
      return { acquired: false, queueFull: true, retryAfterMs: this.#retryAfter(now) };
    }
    this.queue.push({ token, weight: 1, limit: 1, expiresAt: now + queue.claimMs });
    return { acquired: false, queued: true, retryAfterMs: this.#retryAfter(now) };
  }

  extend(now: number, token: string, ttlMs: number): boolean {
    this.#settle(now);
    if (this.holder?.token !== token) return false;
    this.holder.expiresAt = now + ttlMs;
    return true;
  }

  release(now: number, token: string): boolean {
    this.#settle(now);
    const ours = this.holder?.token === token;
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

  refresh(now: number, tokens: readonly string[], claimMs: number): RefreshAnswer {
    this.#settle(now);
    for (const waiter of this.queue) {
      if (tokens.includes(waiter.token) && waiter.localLeaseMs === undefined) waiter.expiresAt = now + claimMs;
    }
    this.#grant(now);
    return {
      statuses: tokens.map((token) =>
        this.holder?.token === token ? "held" : this.queue.some((w) => w.token === token) ? "waiting" : "gone",
      ),
      retryAfterMs: this.#retryAfter(now),
    };
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

/** A grant as a store announces it: the tokens, and the shortest of their reservations in ms. */
export interface Announced {
  tokens: string[];
  reservedMs: number;
}

export interface Inspection {
  holders: { token: string; weight: number; expiresInMs: number }[];
  waiters: { token: string; weight: number; expiresInMs: number }[];
}

const byToken = (a: { token: string }, b: { token: string }): number => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0);
