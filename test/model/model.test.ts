// The model-based suite: random command sequences drive the reference model
// (model.ts), the memory store and the Redis store (its scripts built on a
// clock the suite sets) in lockstep. After every step the three must give the
// same answers and hold the same state, the limit rule must hold, every Redis
// key must have an expiry that covers what it holds and nothing beyond what
// was ever granted, and the memory store must have a clean-up armed for every
// id. After every sequence, time runs out and nothing may remain.
//
// MODEL_RUNS sets the number of sequences (npm run test:model runs thousands);
// a failure prints fast-check's seed and path: MODEL_SEED and MODEL_PATH replay it.
import fc from "fast-check";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Grant, InProcessWaiter } from "../../src/store/contract/calls.js";
import type { Inspection, Store } from "../../src/store/index.js";
import { createMemoryStore } from "../../src/store/memory/index.js";
import { createRedisStore } from "../../src/store/redis/index.js";
import { parseAnnouncement } from "../../src/store/redis/watch.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { type AcquireAnswer, type Announced, LockModel, type Queueing, SemaphoreModel, type TenantCall } from "./model.js";
import { keysUnder, scriptsOnTestClock, TestTime } from "./time.js";

const RUNS = Number(process.env.MODEL_RUNS ?? 200);
const SEED = process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED);
const PATH = process.env.MODEL_PATH;

interface Caller {
  weight: number;
  limit: number;
  leaseMs: number;
  waiterLeaseMs: number;
  maxQueue: number;
  queued: boolean;
  /** A tenant, with its cap and queue bound as this caller passes them (absent: no tenant). */
  tenant?: { name: string; limit: number; maxQueue: number } | undefined;
}

/** Tenant names, odd ones included: the tenant is what follows a token's first '@'. */
const TENANTS = ["a", "b", "c~2", "d@e"];

const callerArbitrary: fc.Arbitrary<Caller> = fc.constantFrom(1, 1, 1, 2, 3, 4).chain((weight) =>
  fc.record({
    weight: fc.constant(weight),
    // Callers of one id pass different limits: the rule must hold for each. Small limits
    // and mostly queueing callers keep the waiting room busy, where the hard cases are.
    limit: fc.constantFrom(weight, weight, weight + 1, Math.max(weight, 3), 5),
    leaseMs: fc.constantFrom(300, 300, 1000, 5000),
    waiterLeaseMs: fc.constantFrom(500, 2000),
    maxQueue: fc.constantFrom(0, 0, 0, 1, 2, 3),
    queued: fc.constantFrom(true, true, false),
    tenant: fc.option(
      fc.record({
        name: fc.constantFrom(...TENANTS),
        limit: fc.constantFrom(weight, weight + 1, 3, 5).map((cap) => Math.min(Math.max(cap, weight), 5)),
        maxQueue: fc.constantFrom(0, 0, 1, 2),
      }),
      { nil: undefined, freq: 2 },
    ),
  }),
);

/**
 * Callers that all have tenants, two names between them (ordered differently by UTF-16 and by
 * bytes: ties between turns go by name, as Redis orders them), with small caps and different weights and
 * caps for one tenant: its waiters stand at their caps, the first of a line may not fit where the
 * next would, and tenants come off their caps as permits return (the parked tenants of lib/grant.lua).
 */
const cappedCallerArbitrary: fc.Arbitrary<Caller> = fc.constantFrom(1, 1, 2).chain((weight) =>
  fc.record({
    weight: fc.constant(weight),
    limit: fc.constantFrom(3, 4, 5),
    leaseMs: fc.constantFrom(300, 1000, 5000),
    waiterLeaseMs: fc.constantFrom(500, 2000),
    maxQueue: fc.constant(0),
    queued: fc.constantFrom(true, true, true, false),
    tenant: fc.record({
      // Two names that JavaScript's `<` and Redis's byte order put in opposite orders.
      name: fc.constantFrom("\uE000", "\u{1F600}"),
      limit: fc.constantFrom(weight, weight + 1, 2),
      maxQueue: fc.constant(0),
    }),
  }),
);

/** Callers that mostly wait (the waiting room busy), for the release bursts. */
const queuedCallerArbitrary: fc.Arbitrary<Caller> = callerArbitrary.map((caller) => ({ ...caller, queued: true, maxQueue: 0 }));

type Storekeeper = Store & { debugIds?: () => { semaphores: [string, boolean][]; locks: [string, boolean][] } };
type Told = { token: string; at: number; fence: number };

let redis: Redis;
let subscriber: Redis;
const heard = new Map<string, Announced[]>();

beforeAll(async () => {
  redis = newRedis();
  subscriber = newRedis();
  subscriber.on("message", (channel: string, message: string) => {
    const list = heard.get(channel) ?? [];
    list.push(announced(parseAnnouncement(message, 0)));
    heard.set(channel, list);
  });
});

afterAll(() => {
  subscriber.disconnect();
});

/** The stores and the model, side by side, on one clock. */
class World {
  readonly time = new TestTime();
  readonly sem = new SemaphoreModel();
  readonly lock = new LockModel();
  readonly prefix = uniquePrefix("model");
  readonly semKey = `{${this.prefix}:s}`;
  readonly lockKey = `{${this.prefix}:l}`;
  readonly memory = createMemoryStore({}, this.time.memoryClock) as Storekeeper;
  readonly redis = createRedisStore(redis, { timeoutMs: 5000 }, scriptsOnTestClock) as Storekeeper;
  /** Another process on the same server, which has not seen the id's tenants: bursts go through it. */
  readonly redisElsewhere = createRedisStore(redis, { timeoutMs: 5000 }, scriptsOnTestClock) as Storekeeper;
  readonly memoryHeard = new Map<string, Announced[]>();
  readonly log: string[] = [];
  #semGen: number[];
  #lockGen: number[];
  #seen = { sem: 0, lock: 0 };
  maxEverSem = 0;
  maxEverLock = 0;

  /** Grants the memory store told its own process's waiters, per kind. */
  readonly told: { sem: Told[]; lock: Told[] } = { sem: [], lock: [] };
  /**
   * The memory store's records of its own process's semaphore leases
   * (`AcquireReply.record`, or the grant's), by token: handed back on release and
   * extend, as the engine does, while Redis answers by token.
   */
  readonly held = new Map<string, object>();

  /** The memory store's record of `token`'s lease, passed on its release and extend, or undefined without one. */
  heldBy(s: Storekeeper, token: string): object | undefined {
    return s === this.memory ? this.held.get(token) : undefined;
  }

  /** `withRedis: false`: the memory store alone (for what only it has: waiters of its own process). */
  constructor(
    readonly callers: Caller[],
    readonly withRedis = true,
  ) {
    this.#semGen = callers.map(() => 0);
    this.#lockGen = callers.map(() => 0);
  }

  async start(): Promise<void> {
    await this.time.start(redis);
    for (const key of [this.semKey, this.lockKey]) {
      this.memoryHeard.set(key, []);
      await this.memory.watch({ storeKey: key, onGrant: (grant) => this.memoryHeard.get(key)?.push(announced(grant)) });
      heard.set(`${key}:ch`, []);
      await subscriber.subscribe(`${key}:ch`);
    }
  }

  async stop(): Promise<void> {
    await subscriber.unsubscribe(`${this.semKey}:ch`, `${this.lockKey}:ch`);
  }

  caller(index: number): Caller {
    return this.callers[index % this.callers.length] as Caller;
  }

  semToken(index: number): string {
    const i = index % this.callers.length;
    const tenant = this.caller(i).tenant;
    return `s${i}.${this.#semGen[i]}${tenant === undefined ? "" : `@${tenant.name}`}`;
  }

  lockToken(index: number): string {
    const i = index % this.callers.length;
    return `l${i}.${this.#lockGen[i]}`;
  }

  /** A caller that released or left comes back, if ever, with a new token, as the engine does. */
  retire(kind: "sem" | "lock", index: number): void {
    const gens = kind === "sem" ? this.#semGen : this.#lockGen;
    const i = index % this.callers.length;
    gens[i] = (gens[i] as number) + 1;
  }

  /** One operation on the model and both stores; their answers must agree. */
  async step<T>(label: string, model: (now: number) => T, store: (s: Storekeeper) => T | Promise<T>): Promise<void> {
    this.log.push(`@${this.time.now % 1_000_000} ${label}`);
    const expected = model(this.time.now);
    const fromMemory = await store(this.memory);
    expect(fromMemory, `memory: ${label}\n${this.log.join("\n")}`).toEqual(expected);
    if (this.withRedis) {
      const fromRedis = await store(this.redis);
      expect(fromRedis, `redis: ${label}\n${this.log.join("\n")}`).toEqual(expected);
    }
    await this.verify(label);
  }

  async advance(ms: number): Promise<void> {
    this.log.push(`@${this.time.now % 1_000_000} advance ${ms}`);
    await this.time.advance(ms, redis, `{${this.prefix}:*`);
    await this.verify(`advance ${ms}`);
  }

  #track(): void {
    const now = this.time.now;
    void now;
    for (const h of this.sem.holders.values()) this.maxEverSem = Math.max(this.maxEverSem, h.expiresAt);
    for (const w of this.sem.queue) this.maxEverSem = Math.max(this.maxEverSem, w.expiresAt);
    if (this.lock.holder) this.maxEverLock = Math.max(this.maxEverLock, this.lock.holder.expiresAt);
    for (const w of this.lock.queue) this.maxEverLock = Math.max(this.maxEverLock, w.expiresAt);
  }

  /** Everything that must hold after every step. */
  async verify(label: string): Promise<void> {
    const context = `after ${label}\n${this.log.join("\n")}`;
    const now = this.time.now;
    this.#track();
    expect(this.sem.violations, context).toEqual([]);

    // Every read at once: they are independent, and one round trip keeps thousands of steps fast.
    const stores = this.withRedis ? [this.memory, this.redis] : [this.memory];
    const [, semState, lockState, figures, expiries, marker, index] = await Promise.all([
      subscriber.ping(),
      Promise.all(stores.map(async (store) => sorted(await store.semaphore.inspect({ storeKey: this.semKey })))),
      Promise.all(stores.map((store) => store.lock.inspect({ storeKey: this.lockKey }))),
      Promise.all(
        stores.map(async (store) => ({
          stats: await store.semaphore.stats({ storeKey: this.semKey }),
          tenants: await Promise.all(TENANTS.map((tenant) => store.semaphore.stats({ storeKey: this.semKey, tenant }))),
          count: await store.semaphore.count({ storeKey: this.semKey }),
          lock: await store.lock.stats({ storeKey: this.lockKey }),
        })),
      ),
      keysUnder(redis, `{${this.prefix}:*`).then(async (keys) => {
        const ats = await Promise.all(keys.map((key) => redis.pexpiretime(key)));
        return new Map(keys.map((key, i) => [key, ats[i] as number]));
      }),
      redis.zscore(this.semKey, "~"),
      Promise.all([
        redis.zrange(`${this.semKey}:t`, "0", "-1", "WITHSCORES"),
        redis.zrangebyscore(this.semKey, "0", "+inf"),
        redis.zscore(this.semKey, "~r"),
      ]),
    ]);
    await new Promise((resolve) => setImmediate(resolve));

    // Grants: the same tokens, in the same batches and order, as the model made them.
    const semGrants = this.sem.grants.slice(this.#seen.sem);
    const lockGrants = this.lock.grants.slice(this.#seen.lock);
    this.#seen = { sem: this.sem.grants.length, lock: this.lock.grants.length };
    expect(drain(this.memoryHeard, this.semKey), `memory grants ${context}`).toEqual(semGrants);
    expect(drain(this.memoryHeard, this.lockKey), `memory lock grants ${context}`).toEqual(lockGrants);
    if (this.withRedis) {
      expect(drain(heard, `${this.semKey}:ch`), `redis grants ${context}`).toEqual(semGrants);
      expect(drain(heard, `${this.lockKey}:ch`), `redis lock grants ${context}`).toEqual(lockGrants);
    }
    // The memory store's own waiters are told at the grant, with its time, in ticket order.
    expect(this.told.sem, `told ${context}`).toEqual(this.sem.told);
    expect(this.told.lock, `told (lock) ${context}`).toEqual(this.lock.told);

    // State: who holds and who waits, with their expiries; figures.
    (this.withRedis ? ["memory", "redis"] : ["memory"]).forEach((name, i) => {
      expect(semState[i], `${name} semaphore state ${context}`).toEqual(this.sem.inspect(now));
      expect(lockState[i], `${name} lock state ${context}`).toEqual(this.lock.inspect(now));
      const stats = this.sem.stats(now);
      expect(figures[i], `${name} figures ${context}`).toEqual({
        stats,
        tenants: TENANTS.map((tenant) => this.sem.stats(now, tenant)),
        count: stats.holders,
        lock: this.lock.stats(now),
      });
    });

    // Redis: every key has an expiry; it covers what the key holds, and nothing beyond what was ever granted.
    if (!this.withRedis) expiries.clear();
    for (const [key, at] of expiries) {
      expect(at, `${key} has no expiry ${context}`).toBeGreaterThan(0);
      const bound = key.startsWith(this.semKey) ? this.maxEverSem : this.maxEverLock;
      expect(at, `${key} outlives every lease ${context}`).toBeLessThanOrEqual(bound + 1);
    }
    const covers = (key: string, latest: number | undefined): void => {
      if (latest === undefined || !this.withRedis) return;
      expect(expiries.get(key), `${key} lapses before what it holds ${context}`).toBeGreaterThanOrEqual(latest);
    };
    const semLatest = this.sem.latest(now);
    covers(this.semKey, semLatest.holders);
    // The typical hold lives in the id's keys: they last while it counts.
    covers(this.semKey, this.sem.holdUntil(now));
    const lockHold = this.lock.holdUntil(now);
    // (A lock's key lives while now <= its PXAT, the hold while now < until.)
    covers(this.lockKey, lockHold === undefined ? undefined : lockHold - 1);
    covers(this.semKey, semLatest.waiters);
    for (const suffix of [":m", ":q", ":qe"]) covers(`${this.semKey}${suffix}`, semLatest.waiters);
    // While waiters exist, the marker sends the one-key fast paths to the full scripts.
    if (this.withRedis && semLatest.waiters !== undefined) {
      expect(marker, `the marker is missing ${context}`).not.toBeNull();
    }
    const lockHolder = this.lock.holder !== undefined && this.lock.holder.expiresAt > now ? this.lock.holder : undefined;
    // A lock lease that ends at e is the key with PXAT e - 1 (Redis drops a key once the time is past it).
    if (lockHolder && this.withRedis) {
      expect(expiries.get(this.lockKey), `lock key expiry ${context}`).toBe(lockHolder.expiresAt - 1);
    }
    const lockWaiters = this.lock.queue.filter((w) => w.expiresAt > now).map((w) => w.expiresAt);
    if (lockWaiters.length > 0 && this.withRedis) {
      for (const suffix of [":q", ":qe"]) covers(`${this.lockKey}${suffix}`, Math.max(...lockWaiters));
    }

    // Redis: the tenant index, unless marked for rebuilding ('~r'), counts each tenant's members present.
    const [counted, members, rebuild] = index;
    if (this.withRedis && rebuild === null && counted.length > 0) {
      const present = new Map<string, number>();
      for (const member of members) {
        const at = member.indexOf("@");
        if (at >= 0) present.set(member.slice(at + 1), (present.get(member.slice(at + 1)) ?? 0) + 1);
      }
      const kept = new Map<string, number>();
      for (let i = 0; i < counted.length; i += 2) kept.set(counted[i] as string, Number(counted[i + 1]));
      expect(kept, `tenant index ${context}`).toEqual(present);
    }

    // Memory: every id it keeps has its clean-up armed, so nothing can be left behind.
    const ids = this.memory.debugIds?.();
    for (const [key, armed] of [...(ids?.semaphores ?? []), ...(ids?.locks ?? [])]) {
      expect(armed, `memory keeps ${key} without a clean-up ${context}`).toBe(true);
    }
  }

  /** Time runs out: both stores must be empty. */
  async finish(): Promise<void> {
    await this.advance(Math.max(1, Math.max(this.maxEverSem, this.maxEverLock) + 5 - this.time.now));
    expect(await keysUnder(redis, `{${this.prefix}:*`), `keys left behind\n${this.log.join("\n")}`).toEqual([]);
    expect(this.memory.debugIds?.(), `memory ids left behind\n${this.log.join("\n")}`).toEqual({ semaphores: [], locks: [] });
  }
}

const announced = (grant: Grant): Announced => ({
  tokens: [...grant.tokens],
  fences: [...grant.fences],
  waiterLeaseMs: grant.waiterLeaseMs,
});

function drain(map: Map<string, Announced[]>, key: string): Announced[] {
  const list = map.get(key) ?? [];
  map.set(key, []);
  return list;
}

function sorted(inspection: Inspection): Inspection {
  return { holders: [...inspection.holders].sort((a, b) => (a.token < b.token ? -1 : 1)), waiters: inspection.waiters };
}

const tenantCall = (caller: Caller): TenantCall | undefined =>
  caller.tenant === undefined ? undefined : { limit: caller.tenant.limit, maxQueue: caller.tenant.maxQueue };

/** The store call of a semaphore acquire by `caller` (the model takes the same values as arguments). */
const acquireCall = (w: World, c: Caller, token: string, queue?: Queueing) => ({
  storeKey: w.semKey,
  token,
  limit: c.limit,
  weight: c.weight,
  leaseMs: c.leaseMs,
  queue,
  tenant: tenantCall(c),
});

const queueing = (caller: Caller): Queueing | undefined =>
  caller.queued ? { waiterLeaseMs: caller.waiterLeaseMs, maxQueue: caller.maxQueue } : undefined;

type Command = fc.AsyncCommand<object, World>;

function command(name: string, run: (world: World) => Promise<void>): Command {
  return { check: () => true, run: (_model, world) => run(world), toString: () => name };
}

const index = fc.nat({ max: 5 });
/** How long a released lease was held (the typical hold's input); undefined: not said. */
const heldArbitrary = fc.constantFrom<number | undefined>(undefined, 0, 3, 40, 150, 700, 2400);
/** The holds of a burst's releases, one per caller. */
const burstHeld = [0, 40, 150, 700, 2400, 90];

const semaphoreCommands = [
  index.map((i) =>
    command(`semaphore acquire c${i}`, async (w) => {
      const c = w.caller(i);
      const token = w.semToken(i);
      const queue = queueing(c);
      await w.step<AcquireAnswer>(
        `semaphore acquire ${token} (w${c.weight} limit ${c.limit} lease ${c.leaseMs}${queue ? ` queue ${queue.waiterLeaseMs}/${queue.maxQueue}` : ""})`,
        (now) => w.sem.acquire(now, token, c.limit, c.weight, c.leaseMs, queue, undefined, tenantCall(c)),
        (s) => s.semaphore.acquire(acquireCall(w, c, token, queue)),
      );
    }),
  ),
  fc.tuple(index, heldArbitrary).map(([i, heldMs]) =>
    command(`semaphore release c${i} held ${heldMs}`, async (w) => {
      const token = w.semToken(i);
      const weight = w.caller(i).weight;
      await w.step(
        `semaphore release ${token} held ${heldMs}`,
        (now) => w.sem.release(now, token, heldMs),
        async (s) => s.semaphore.release({ storeKey: w.semKey, token, weight, heldMs, record: w.heldBy(s, token) }),
      );
      w.retire("sem", i);
    }),
  ),
  fc.tuple(index, fc.constantFrom(300, 1000, 5000)).map(([i, ms]) =>
    command(`semaphore extend c${i} ${ms}`, async (w) => {
      const token = w.semToken(i);
      await w.step(
        `semaphore extend ${token} ${ms}`,
        (now) => w.sem.extend(now, token, ms),
        async (s) =>
          s.semaphore.extend({ storeKey: w.semKey, token, leaseMs: ms, weight: w.caller(i).weight, record: w.heldBy(s, token) }),
      );
    }),
  ),
  index.map((i) =>
    command(`semaphore leave c${i}`, async (w) => {
      const token = w.semToken(i);
      await w.step(
        `semaphore leave ${token}`,
        (now) => w.sem.leave(now, token),
        (s) => s.semaphore.leave({ storeKey: w.semKey, token }),
      );
      w.retire("sem", i);
    }),
  ),
  fc.tuple(fc.integer({ min: 1, max: 63 }), fc.constantFrom(500, 2000)).map(([mask, waiterLeaseMs]) =>
    command(`semaphore refresh ${mask} ${waiterLeaseMs}`, async (w) => {
      const tokens = w.callers.map((_, i) => w.semToken(i)).filter((_, i) => (mask >> i) & 1);
      if (tokens.length === 0) return;
      await w.step(
        `semaphore refresh ${tokens.join(",")} ${waiterLeaseMs}`,
        (now) => w.sem.refresh(now, tokens, waiterLeaseMs),
        (s) => s.semaphore.refreshWaiters({ storeKey: w.semKey, tokens, waiterLeaseMs }),
      );
    }),
  ),
];

/** Several calls issued in one turn, as concurrent requests make them: the Redis store gathers them into one script call. */
const burst = fc.array(index, { minLength: 2, maxLength: 6 });
const burstCommands = [
  burst.map((indexes) =>
    command(`semaphore acquire burst ${indexes.join(",")}`, async (w) => {
      const calls = indexes.map((i) => ({ c: w.caller(i), token: w.semToken(i) }));
      await w.step(
        `semaphore acquire burst ${calls.map(({ c, token }) => `${token} (w${c.weight} limit ${c.limit} lease ${c.leaseMs})`).join(", ")}`,
        (now) =>
          calls.map(({ c, token }) =>
            w.sem.acquire(now, token, c.limit, c.weight, c.leaseMs, undefined, undefined, tenantCall(c)),
          ),
        (s) =>
          Promise.all(
            calls.map(({ c, token }) => (s === w.redis ? w.redisElsewhere : s).semaphore.acquire(acquireCall(w, c, token))),
          ),
      );
    }),
  ),
  // Callers joining the queue together (as the callers whose releases one reply answered come back
  // at once): past the first, one full acquire call (lua/semaphore-acquire.lua). Each queues, so that
  // all take that path in the order made (a fail-fast call would take the fast path, in its own call).
  burst.map((indexes) =>
    command(`semaphore join burst ${indexes.join(",")}`, async (w) => {
      const calls = indexes.map((i) => {
        const c = w.caller(i);
        return { c, token: w.semToken(i), queue: { waiterLeaseMs: c.waiterLeaseMs, maxQueue: c.maxQueue } };
      });
      await w.step(
        `semaphore join burst ${calls.map(({ c, token, queue }) => `${token} (w${c.weight} limit ${c.limit} lease ${c.leaseMs} queue ${queue.waiterLeaseMs}/${queue.maxQueue})`).join(", ")}`,
        (now) =>
          calls.map(({ c, token, queue }) =>
            w.sem.acquire(now, token, c.limit, c.weight, c.leaseMs, queue, undefined, tenantCall(c)),
          ),
        (s) => Promise.all(calls.map(({ c, token, queue }) => s.semaphore.acquire(acquireCall(w, c, token, queue)))),
      );
    }),
  ),
  // A subset of the callers (a bit each), so that most bursts release several leases: on an id with
  // waiters, past the first two they go in one full release call (lua/semaphore-release.lua).
  fc
    .oneof(
      burst,
      fc.integer({ min: 1, max: 63 }).map((mask) => [0, 1, 2, 3, 4, 5].filter((i) => (mask >> i) & 1)),
    )
    .map((indexes) =>
      command(`semaphore release burst ${indexes.join(",")}`, async (w) => {
        const calls = [...new Set(indexes.map((i) => i % w.callers.length))].map((i) => ({
          i,
          c: w.caller(i),
          token: w.semToken(i),
        }));
        await w.step(
          `semaphore release burst ${calls.map(({ token }) => token).join(", ")}`,
          (now) => calls.map(({ i, token }) => w.sem.release(now, token, burstHeld[i])),
          (s) =>
            Promise.all(
              calls.map(({ i, c, token }) =>
                s.semaphore.release({ storeKey: w.semKey, token, weight: c.weight, heldMs: burstHeld[i] }),
              ),
            ),
        );
        for (const { i } of calls) w.retire("sem", i);
      }),
    ),
  fc.tuple(burst, fc.constantFrom(300, 1000, 5000)).map(([indexes, ms]) =>
    command(`semaphore extend burst ${indexes.join(",")} ${ms}`, async (w) => {
      const calls = indexes.map((i) => ({ c: w.caller(i), token: w.semToken(i) }));
      await w.step(
        `semaphore extend burst ${calls.map(({ token }) => token).join(", ")} ${ms}`,
        (now) => calls.map(({ token }) => w.sem.extend(now, token, ms)),
        (s) =>
          Promise.all(
            calls.map(({ c, token }) => s.semaphore.extend({ storeKey: w.semKey, token, leaseMs: ms, weight: c.weight })),
          ),
      );
    }),
  ),
];

/** Waiters of the memory store's own process (what the engine uses in process): memory store only. */
const localCommands = [
  fc.tuple(index, fc.constantFrom(300, 1000, 5000), fc.constantFrom(0, 0, 1, 2)).map(([i, waitMs, maxQueue]) =>
    command(`semaphore wait locally c${i} ${waitMs}`, async (w) => {
      const c = w.caller(i);
      const token = w.semToken(i);
      await w.step(
        `semaphore wait locally ${token} (w${c.weight} limit ${c.limit} lease ${c.leaseMs} wait ${waitMs} max ${maxQueue})`,
        (now) =>
          w.sem.acquire(now, token, c.limit, c.weight, c.leaseMs, undefined, { until: now + waitMs, maxQueue }, tenantCall(c)),
        async (s) => {
          // A waiter of this process (`QueueOptions.waiter`): the store keeps it without a waiter lease.
          const waiter: InProcessWaiter = {
            leaseMs: c.leaseMs,
            until: w.time.now + waitMs,
            maxQueue,
            onGrant: (at, fence, record) => {
              w.told.sem.push({ token, at, fence });
              if (record !== undefined) w.held.set(token, record);
            },
            // The model never closes its stores.
            onClose: (error) => {
              throw error;
            },
          };
          const answer = await s.semaphore.acquire({
            storeKey: w.semKey,
            token,
            limit: c.limit,
            weight: c.weight,
            leaseMs: c.leaseMs,
            queue: { waiterLeaseMs: 1, maxQueue, waiter },
            tenant: tenantCall(c),
          });
          const { record, handedOff, ...reply } = answer;
          expect(handedOff).toBe(reply.queued === true ? true : undefined);
          if (record !== undefined) w.held.set(token, record);
          return reply;
        },
      );
    }),
  ),
  fc.tuple(index, fc.constantFrom(300, 1000, 5000)).map(([i, waitMs]) =>
    command(`lock wait locally c${i} ${waitMs}`, async (w) => {
      const c = w.caller(i);
      const token = w.lockToken(i);
      await w.step(
        `lock wait locally ${token} (ttl ${c.leaseMs} wait ${waitMs})`,
        (now) => w.lock.acquire(now, token, c.leaseMs, undefined, { until: now + waitMs, maxQueue: 0 }),
        async (s) => {
          const waiter: InProcessWaiter = {
            leaseMs: c.leaseMs,
            until: w.time.now + waitMs,
            maxQueue: 0,
            onGrant: (at, fence) => w.told.lock.push({ token, at, fence }),
            onClose: (error) => {
              throw error;
            },
          };
          const { handedOff, ...reply } = await s.lock.acquire({
            storeKey: w.lockKey,
            token,
            leaseMs: c.leaseMs,
            queue: { waiterLeaseMs: 1, maxQueue: 0, waiter },
          });
          expect(handedOff).toBe(reply.queued === true ? true : undefined);
          return reply;
        },
      );
    }),
  ),
];

const lockCommands = [
  index.map((i) =>
    command(`lock acquire c${i}`, async (w) => {
      const c = w.caller(i);
      const token = w.lockToken(i);
      const queue = queueing(c);
      await w.step(
        `lock acquire ${token} (ttl ${c.leaseMs}${queue ? ` queue ${queue.waiterLeaseMs}/${queue.maxQueue}` : ""})`,
        (now) => w.lock.acquire(now, token, c.leaseMs, queue),
        (s) => s.lock.acquire({ storeKey: w.lockKey, token, leaseMs: c.leaseMs, queue }),
      );
    }),
  ),
  fc.tuple(index, heldArbitrary).map(([i, heldMs]) =>
    command(`lock release c${i} held ${heldMs}`, async (w) => {
      const token = w.lockToken(i);
      await w.step(
        `lock release ${token} held ${heldMs}`,
        (now) => w.lock.release(now, token, heldMs),
        (s) => s.lock.release({ storeKey: w.lockKey, token, heldMs }),
      );
      w.retire("lock", i);
    }),
  ),
  fc.tuple(index, fc.constantFrom(300, 1000, 5000)).map(([i, ms]) =>
    command(`lock extend c${i} ${ms}`, async (w) => {
      const token = w.lockToken(i);
      await w.step(
        `lock extend ${token} ${ms}`,
        (now) => w.lock.extend(now, token, ms),
        (s) => s.lock.extend({ storeKey: w.lockKey, token, leaseMs: ms }),
      );
    }),
  ),
  index.map((i) =>
    command(`lock leave c${i}`, async (w) => {
      const token = w.lockToken(i);
      await w.step(
        `lock leave ${token}`,
        (now) => w.lock.leave(now, token),
        (s) => s.lock.leave({ storeKey: w.lockKey, token }),
      );
      w.retire("lock", i);
    }),
  ),
  fc.tuple(fc.integer({ min: 1, max: 63 }), fc.constantFrom(500, 2000)).map(([mask, waiterLeaseMs]) =>
    command(`lock refresh ${mask} ${waiterLeaseMs}`, async (w) => {
      const tokens = w.callers.map((_, i) => w.lockToken(i)).filter((_, i) => (mask >> i) & 1);
      if (tokens.length === 0) return;
      await w.step(
        `lock refresh ${tokens.join(",")} ${waiterLeaseMs}`,
        (now) => w.lock.refresh(now, tokens, waiterLeaseMs),
        (s) => s.lock.refreshWaiters({ storeKey: w.lockKey, tokens, waiterLeaseMs }),
      );
    }),
  ),
];

const clockCommands = [
  fc
    .constantFrom(1, 50, 99, 100, 299, 300, 301, 499, 500, 501, 1000, 1999, 2000, 5000)
    .map((ms) => command(`advance ${ms}`, (w) => w.advance(ms))),
];

/** A property over command sequences of one kind, with the world built and torn down around each. */
function sequences(commands: fc.Arbitrary<Command>[], runs: number, withRedis = true, callers = callerArbitrary, minCallers = 2) {
  return fc.assert(
    fc.asyncProperty(
      fc.array(callers, { minLength: minCallers, maxLength: 6 }),
      fc.commands(commands, { maxCommands: 80, size: "max" }),
      async (callers, sequence) => {
        const world = new World(callers, withRedis);
        await world.start();
        try {
          await fc.asyncModelRun(() => ({ model: {}, real: world }), sequence);
          await world.finish();
        } finally {
          await world.stop();
        }
      },
    ),
    { numRuns: runs, ...(SEED === undefined ? {} : { seed: SEED }), ...(PATH === undefined ? {} : { path: PATH }) },
  );
}

// Weighted by repetition: acquires and the clock most, as they make the interesting states.
const [semAcquire, semRelease, semExtend, semLeave, semRefresh] = semaphoreCommands as fc.Arbitrary<Command>[];
const [lockAcquire, lockRelease, lockExtend, lockLeave, lockRefresh] = lockCommands as fc.Arbitrary<Command>[];
const advance = clockCommands[0] as fc.Arbitrary<Command>;
const [acquireBurst, joinBurst, releaseBurst, extendBurst] = burstCommands as fc.Arbitrary<Command>[];

describe("model-based: both stores against the reference model", () => {
  it(`semaphores: every answer, state, limit and expiry agrees (${RUNS} sequences)`, async () => {
    await sequences(
      [
        semAcquire,
        semAcquire,
        semAcquire,
        semAcquire,
        semRelease,
        semRelease,
        semExtend,
        semLeave,
        semRefresh,
        semRefresh,
        acquireBurst,
        joinBurst,
        releaseBurst,
        releaseBurst,
        extendBurst,
        advance,
        advance,
        advance,
        advance,
      ].map((command) => command as fc.Arbitrary<Command>),
      RUNS,
    );
  }, 900_000);

  it(`tenants at their caps: every answer, state, limit and expiry agrees (${Math.ceil(RUNS / 3)} sequences)`, async () => {
    await sequences(
      [
        semAcquire,
        semAcquire,
        semAcquire,
        semRelease,
        semRelease,
        semLeave,
        semLeave,
        semRefresh,
        acquireBurst,
        joinBurst,
        releaseBurst,
        advance,
        advance,
      ].map((command) => command as fc.Arbitrary<Command>),
      Math.ceil(RUNS / 3),
      true,
      cappedCallerArbitrary,
    );
  }, 900_000);

  it(`release bursts on an id with waiters: one full release call, the outcome of one release after another (${Math.ceil(RUNS / 3)} sequences)`, async () => {
    await sequences(
      [
        semAcquire,
        semAcquire,
        semAcquire,
        acquireBurst,
        joinBurst,
        joinBurst,
        releaseBurst,
        releaseBurst,
        releaseBurst,
        semRefresh,
        advance,
      ].map((command) => command as fc.Arbitrary<Command>),
      Math.ceil(RUNS / 3),
      true,
      fc.oneof(queuedCallerArbitrary, cappedCallerArbitrary),
      5,
    );
  }, 900_000);

  it(`waiters of the store's own process: the memory store and the model agree (${Math.ceil(RUNS / 3)} sequences)`, async () => {
    const [semWait, lockWait] = localCommands as fc.Arbitrary<Command>[];
    await sequences(
      [
        semWait,
        semWait,
        semAcquire,
        semRelease,
        semRelease,
        semLeave,
        semRefresh,
        lockWait,
        lockAcquire,
        lockRelease,
        advance,
        advance,
        advance,
      ].map((command) => command as fc.Arbitrary<Command>),
      Math.ceil(RUNS / 3),
      false,
    );
  }, 900_000);

  it(`locks: every answer, state and expiry agrees (${Math.ceil(RUNS / 3)} sequences)`, async () => {
    await sequences(
      [lockAcquire, lockAcquire, lockAcquire, lockRelease, lockExtend, lockLeave, lockRefresh, advance, advance, advance].map(
        (command) => command as fc.Arbitrary<Command>,
      ),
      Math.ceil(RUNS / 3),
    );
  }, 900_000);
});
