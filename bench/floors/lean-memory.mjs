// The floor of an in-process leased semaphore (issue #12, item 5): what keeping leasehold's guarantees
// costs when nothing else is in the way. Bench-only; not part of the library.
//
//   npm run build && node bench/floors/lean-memory.mjs              # every subject, 3 interleaved rounds
//   SUBJECT="lean run" N=200000 node --single-threaded bench/floors/lean-memory.mjs   # one, for callgrind:
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded ... at two values of N,
//   (instructions at the larger - at the smaller) / (difference of N) = instructions per task.
//
// Guarantees kept here, as leasehold keeps them: a 128-bit random token per lease (pooled randomness: one
// randomFillSync per 256 tokens, sliced to base64url), a lease with an expiry that a lapsed holder loses
// (checked lazily, when the set is full: no timer per lease), release() answering false once the lease
// lapsed, a lazily made abort signal that fires on loss, FIFO waiters with waitMs, a freed permit handed
// straight to the next waiter, and `run` renewing its lease (one shared timer per semaphore, not one per
// lease). Not kept: fences, tenants, the typical hold, events, close(), option validation. The "full"
// subjects (lean-full.mjs) add fences, tenant turns, abort and close() listeners, leasehold's token format.
import { randomFillSync } from "node:crypto";
import { Sema } from "async-sema";
import pLimit from "p-limit";
import { FullSemaphore } from "./lean-full.mjs";

// LEASEHOLD=/path/to/another/dist/esm/src/index.js compares another build (e.g. main's) with the same loop.
const { memoryStore, semaphore } = await import(process.env.LEASEHOLD ?? "../../dist/esm/src/index.js");

const pool = Buffer.alloc(4096);
let offset = pool.length;
function newToken() {
  if (offset >= pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const token = pool.toString("base64url", offset, offset + 16);
  offset += 16;
  return token;
}

class LeaseLost extends Error {}

class Lease {
  #controller;
  constructor(owner, token, expiresAt) {
    this.owner = owner;
    this.token = token;
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
    this.lost = new LeaseLost("lease lost");
    this.#controller?.abort(this.lost);
  }
  release() {
    return this.owner.release(this);
  }
}

class LeanSemaphore {
  constructor(limit, leaseMs) {
    this.limit = limit;
    this.leaseMs = leaseMs;
    this.holders = new Set();
    this.earliest = Number.POSITIVE_INFINITY;
    // FIFO: an array with a moving head (compacted when half is consumed).
    this.waiters = [];
    this.head = 0;
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.kept = new Set();
    this.renewer = undefined;
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

  #add(now) {
    const lease = new Lease(this, newToken(), now + this.leaseMs);
    this.holders.add(lease);
    if (lease.expiresAt < this.earliest) this.earliest = lease.expiresAt;
    return lease;
  }

  tryAcquire(now = performance.now()) {
    if (this.holders.size >= this.limit || this.head < this.waiters.length) {
      this.#prune(now);
      if (this.holders.size >= this.limit || this.head < this.waiters.length) return null;
    }
    return this.#add(now);
  }

  acquire(waitMs = 0) {
    const now = performance.now();
    const lease = this.tryAcquire(now);
    if (lease !== null || waitMs === 0) return Promise.resolve(lease);
    return new Promise((resolve) => {
      const waiter = { resolve, until: now + waitMs };
      this.waiters.push(waiter);
      this.#arm(waiter.until);
    });
  }

  release(lease) {
    if (lease.released) return Promise.resolve(false);
    lease.released = true;
    this.kept.delete(lease);
    if (!this.holders.delete(lease)) return Promise.resolve(false);
    const now = performance.now();
    const live = lease.expiresAt > now;
    if (!live) lease.lose();
    this.#handOff(now);
    return Promise.resolve(live);
  }

  #handOff(now) {
    while (this.head < this.waiters.length && this.holders.size < this.limit) {
      const waiter = this.waiters[this.head];
      this.waiters[this.head++] = undefined;
      if (waiter.until <= now) {
        waiter.resolve(null);
        continue;
      }
      waiter.resolve(this.#add(now));
    }
    if (this.head > 1024 && this.head * 2 > this.waiters.length) {
      this.waiters = this.waiters.slice(this.head);
      this.head = 0;
    }
  }

  // One timer per semaphore, at the nearest of the head waiter's deadline and the earliest lease end.
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
    // Waiters past their deadline leave (FIFO with one waitMs: they are at the head).
    while (this.head < this.waiters.length && this.waiters[this.head].until <= now) {
      this.waiters[this.head++].resolve(null);
    }
    if (this.head < this.waiters.length) this.#arm(Math.min(this.waiters[this.head].until, this.earliest));
  }

  async run(fn, waitMs = 0) {
    const lease = await this.acquire(waitMs);
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

  // Renewal: one interval per semaphore for every lease `run` keeps.
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

const task = async () => {};
const loops = 64;

function subjects() {
  const slots = semaphore({ client: memoryStore(), limit: loops });
  const queued = semaphore({ client: memoryStore(), limit: 16, waitMs: 60_000 });
  const lean = new LeanSemaphore(loops, 60_000);
  const lean16 = new LeanSemaphore(16, 60_000);
  const full = new FullSemaphore(loops, 60_000);
  const full16 = new FullSemaphore(16, 60_000);
  const limit = pLimit(loops);
  const limit16 = pLimit(16);
  const sema = new Sema(loops);
  return {
    "p-limit": () => limit(task),
    "async-sema": async () => {
      await sema.acquire();
      await task();
      sema.release();
    },
    "lean acquire+release": async () => {
      const lease = await lean.acquire();
      await task();
      await lease?.release();
    },
    "lean run": () => lean.run(task),
    "full acquire+release": async () => {
      const lease = await full.acquire();
      await task();
      await lease?.release();
    },
    "full run": () => full.run(task),
    "leasehold acquire+release": async () => {
      const lease = await slots.acquire("k");
      await task();
      await lease?.release();
    },
    "leasehold run": () => slots.run("k", task),
    "p-limit, limit 16": () => limit16(task),
    "lean, limit 16, queueing run": () => lean16.run(task, 60_000),
    "full, limit 16, queueing run": () => full16.run(task, 60_000),
    "leasehold, limit 16, queueing run": () => queued.run("k", task),
  };
}

// Concurrent callers of each subject (WORKERS=8 or 1 with the limit 16 subjects: a permit always free).
const workers = Number(process.env.WORKERS ?? loops);

// Tasks per CPU-second of the process, as bench/run.ts counts them.
async function timeLoop(once, count) {
  let left = count;
  const started = process.cpuUsage();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (left-- > 0) await once();
    }),
  );
  const used = process.cpuUsage(started);
  return count / ((used.user + used.system) / 1e6);
}

const all = subjects();
const count = Number(process.env.N ?? 200_000);
if (process.env.SUBJECT !== undefined) {
  const once = all[process.env.SUBJECT];
  if (once === undefined) throw new Error(`no subject ${process.env.SUBJECT}`);
  const perSecond = await timeLoop(once, count);
  if (process.env.PRINT !== undefined)
    console.log(`${process.env.SUBJECT}: ${Math.round(perSecond).toLocaleString("en")} tasks per CPU-second`);
} else {
  const rounds = Number(process.env.ROUNDS ?? 3);
  const figures = Object.fromEntries(Object.keys(all).map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [name, once] of Object.entries(all)) figures[name].push(Math.round(await timeLoop(once, count)));
  }
  for (const [name, values] of Object.entries(figures)) {
    const base = name.includes("16") ? figures["p-limit, limit 16"] : figures["p-limit"];
    const ratios = values.map((value, i) => (value / base[i]).toFixed(3));
    console.log(
      `${name.padEnd(36)} ${values.map((v) => v.toLocaleString("en").padStart(10)).join(" ")}   vs p-limit ${ratios.join(", ")}`,
    );
  }
}
