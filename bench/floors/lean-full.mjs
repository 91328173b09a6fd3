// The floor of leasehold's in-process feature set (issue #12, item 5, sixth round): lean-memory.mjs's
// LeanSemaphore plus what users of the embedded store rely on that it left out. Bench-only; not part of
// the library. Run through lean-memory.mjs (subjects "full ...").
//
// Kept, as leasehold keeps them: a 128-bit random token per lease, in leasehold's format (22 base64url
// characters, then ".<ms, base36>.<owner>.<limit>", made in one concatenation per millisecond's suffix);
// a lease with an expiry a lapsed holder loses (pruned lazily); release() answering false once lapsed;
// a lazily made abort signal; fences (max(last + 1, now in µs), per semaphore); tenants served in turns
// (round robin over the tenants waiting, each in arrival order; tenantless callers are one tenant); FIFO
// waiters with waitMs (one shared timer per semaphore); a freed permit handed straight to the next
// waiter; close() ending every wait (it walks its own lines: no listener per wait), and a wait listening
// on the caller's abort signal when one is given; `run` renewing its lease. Events are off (no subscriber), as in the bench.
// Not kept: the typical hold, tenant caps, weights, option validation, the Store contract.
import { randomFillSync } from "node:crypto";

const pool = Buffer.alloc(4095);
let poolText = "";
let poolOffset = 0;
function randomPart() {
  if (poolOffset + 22 > poolText.length) {
    randomFillSync(pool);
    poolText = pool.toString("base64url");
    poolOffset = 0;
  }
  const part = poolText.slice(poolOffset, poolOffset + 22);
  poolOffset += 22;
  return part;
}

const origin = performance.timeOrigin;
class Suffix {
  #ms = -1;
  #text = "";
  constructor(tag) {
    this.tag = tag;
  }
  at(now) {
    const ms = Math.floor(origin + now);
    if (ms !== this.#ms) {
      this.#ms = ms;
      this.#text = `.${ms.toString(36)}${this.tag}`;
    }
    return this.#text;
  }
}

class FullLease {
  #controller;
  constructor(owner, token, fence, expiresAt) {
    this.owner = owner;
    this.token = token;
    this.fence = fence;
    this.expiresAt = expiresAt;
    this.released = false;
    this.lost = undefined;
  }
  get signal() {
    this.#controller ??= new AbortController();
    if (this.lost !== undefined) this.#controller.abort(this.lost);
    return this.#controller.signal;
  }
  lose() {
    if (this.lost !== undefined) return;
    this.lost = new Error("lease lost");
    this.#controller?.abort(this.lost);
  }
  release() {
    return this.owner.release(this);
  }
}

export class FullSemaphore {
  constructor(limit, leaseMs) {
    this.limit = limit;
    this.leaseMs = leaseMs;
    this.holders = new Set();
    this.earliest = Number.POSITIVE_INFINITY;
    this.fence = 0;
    this.suffix = new Suffix(`.${Buffer.from("bench").toString("base64url")}.${limit.toString(36)}`);
    // Waiting tenants in turn order (a ring: the served tenant goes to the back), each its own FIFO.
    this.lines = new Map();
    this.turns = [];
    this.turnHead = 0;
    this.waiting = 0;
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.kept = new Set();
    this.renewer = undefined;
    this.closed = undefined;
  }

  // close() ends every wait itself (it has them all, in its lines): no listener per wait on a signal.
  close() {
    this.closed ??= new Error("closed");
    for (const line of this.lines.values()) {
      for (let at = line.head; at < line.waiters.length; at++) {
        const waiter = line.waiters[at];
        if (!waiter.done) {
          this.#end(waiter);
          waiter.reject(this.closed);
        }
      }
    }
  }

  #prune(now) {
    if (this.earliest > now) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const lease of this.holders) {
      if (lease.expiresAt <= now) {
        this.holders.delete(lease);
        lease.lose();
      } else if (lease.expiresAt < earliest) earliest = lease.expiresAt;
    }
    this.earliest = earliest;
  }

  #add(now, tenant) {
    this.fence = Math.max(this.fence + 1, Math.floor((origin + now) * 1000));
    const token = randomPart() + this.suffix.at(now);
    const lease = new FullLease(this, tenant === "" ? token : `${token}@${tenant}`, this.fence, now + this.leaseMs);
    this.holders.add(lease);
    if (lease.expiresAt < this.earliest) this.earliest = lease.expiresAt;
    return lease;
  }

  tryAcquire(now, tenant = "") {
    if (this.holders.size >= this.limit || this.waiting > 0) {
      this.#prune(now);
      this.#handOff(now);
      if (this.holders.size >= this.limit || this.waiting > 0) return null;
    }
    return this.#add(now, tenant);
  }

  acquire(waitMs = 0, tenant = "", signal = undefined) {
    if (this.closed !== undefined) return Promise.reject(this.closed);
    signal?.throwIfAborted();
    const now = performance.now();
    const lease = this.tryAcquire(now, tenant);
    if (lease !== null || waitMs === 0) return Promise.resolve(lease);
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, until: now + waitMs, tenant, done: false, signal, aborted: undefined };
      if (signal !== undefined) {
        waiter.aborted = () => this.#abort(waiter);
        signal.addEventListener("abort", waiter.aborted);
      }
      let line = this.lines.get(tenant);
      if (line === undefined) {
        line = { waiters: [], head: 0 };
        this.lines.set(tenant, line);
        this.turns.push(tenant);
      }
      line.waiters.push(waiter);
      this.waiting++;
      this.#arm(waiter.until);
    });
  }

  #end(waiter) {
    waiter.done = true;
    this.waiting--;
    if (waiter.aborted !== undefined) waiter.signal.removeEventListener("abort", waiter.aborted);
  }

  #abort(waiter) {
    if (waiter.done) return;
    this.#end(waiter);
    waiter.reject(waiter.signal.reason);
  }

  release(lease) {
    if (lease.released) return Promise.resolve(false);
    lease.released = true;
    this.kept.delete(lease);
    if (!this.holders.delete(lease)) return Promise.resolve(false);
    const now = performance.now();
    const live = lease.expiresAt > now;
    if (!live) lease.lose();
    if (this.waiting > 0) this.#handOff(now);
    return Promise.resolve(live);
  }

  // The head waiter of the tenant whose turn it is; a line left empty leaves the ring.
  #next() {
    while (this.turnHead < this.turns.length) {
      const tenant = this.turns[this.turnHead];
      const line = this.lines.get(tenant);
      while (line.head < line.waiters.length && line.waiters[line.head].done) line.waiters[line.head++] = undefined;
      if (line.head < line.waiters.length) return line;
      this.lines.delete(tenant);
      this.turnHead++;
    }
    this.turns.length = 0;
    this.turnHead = 0;
    return undefined;
  }

  #handOff(now) {
    while (this.waiting > 0 && this.holders.size < this.limit) {
      const line = this.#next();
      if (line === undefined) break;
      const waiter = line.waiters[line.head];
      line.waiters[line.head++] = undefined;
      if (line.head > 1024 && line.head * 2 > line.waiters.length) {
        line.waiters = line.waiters.slice(line.head);
        line.head = 0;
      }
      // Its tenant's turn is served: to the back of the ring (unless it is alone there).
      if (this.turns.length - this.turnHead > 1) {
        this.turns.push(this.turns[this.turnHead]);
        this.turns[this.turnHead++] = undefined;
        if (this.turnHead > 1024 && this.turnHead * 2 > this.turns.length) {
          this.turns = this.turns.slice(this.turnHead);
          this.turnHead = 0;
        }
      }
      this.#end(waiter);
      if (waiter.until <= now) {
        waiter.resolve(null);
        continue;
      }
      waiter.resolve(this.#add(now, waiter.tenant));
    }
  }

  #arm(at) {
    if (this.timer !== undefined && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.#look(), Math.max(1, at - performance.now()));
  }

  #look() {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = performance.now();
    this.#prune(now);
    this.#handOff(now);
    let soonest = this.earliest;
    for (const line of this.lines.values()) {
      for (let at = line.head; at < line.waiters.length; at++) {
        const waiter = line.waiters[at];
        if (waiter.done) continue;
        if (waiter.until <= now) {
          this.#end(waiter);
          waiter.resolve(null);
        } else if (waiter.until < soonest) soonest = waiter.until;
      }
    }
    if (this.waiting > 0) this.#arm(soonest);
  }

  async run(fn, waitMs = 0, tenant = "", signal = undefined) {
    const lease = await this.acquire(waitMs, tenant, signal);
    if (lease === null) throw new Error("full");
    this.#keep(lease);
    let value;
    let failed;
    try {
      value = await fn(lease);
    } catch (error) {
      failed = { error };
    }
    const ours = await lease.release();
    if (!ours) throw lease.lost;
    if (failed !== undefined) throw failed.error;
    return value;
  }

  #keep(lease) {
    this.kept.add(lease);
    if (this.renewer !== undefined) return;
    this.renewer = setInterval(() => {
      const now = performance.now();
      for (const kept of this.kept) kept.expiresAt = now + this.leaseMs;
      this.earliest = now + this.leaseMs;
      if (this.kept.size === 0) {
        clearInterval(this.renewer);
        this.renewer = undefined;
      }
    }, this.leaseMs / 4);
    this.renewer.unref();
  }
}
