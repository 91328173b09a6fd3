import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import { type Lease, lock, redisStore, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { uniquePrefix } from "../../support/redis.js";
import { type RedisServer, startRedisServer } from "../../support/redis-server.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

/** Fences in the order their leases were granted: each must be above every one before it. */
function expectRising(fences: number[]): void {
  for (const fence of fences) expect(Number.isSafeInteger(fence) && fence > 0, `fence ${fence}`).toBe(true);
  for (let i = 1; i < fences.length; i++) {
    expect(fences[i], `fence ${i} of ${fences.join(", ")}`).toBeGreaterThan(fences[i - 1] as number);
  }
}

const fenceOf = (lease: Lease | null): number => {
  expect(lease).not.toBeNull();
  return (lease as Lease).fence;
};

describe.each(storesUnderTest)("fencing tokens on the $name store", ({ name, make, redis }) => {
  const setup = ({ limit = 3, leaseMs }: { limit?: number; leaseMs?: number } = {}) => {
    const prefix = uniquePrefix();
    const client = make();
    const lease = leaseMs === undefined ? {} : { leaseMs };
    const ttl = leaseMs === undefined ? {} : { ttlMs: leaseMs };
    // Prefixes of their own: a semaphore and a lock with one prefix and id would name the same key.
    return {
      prefix,
      client,
      slots: semaphore({ client, limit, prefix: `${prefix}-s`, ...lease }),
      locks: lock({ client, prefix: `${prefix}-l`, ...ttl }),
    };
  };

  it("every grant's fence is above every earlier grant's on the id: concurrent holders, one turn's batch, release and re-acquire", async () => {
    const { slots, locks } = setup({ limit: 10 });
    // Ten in one turn: past the first two, the Redis store sends them as one script call; each still gets its own fence.
    const batch = await Promise.all(Array.from({ length: 10 }, () => slots.acquire("k")));
    const first = batch.map(fenceOf);
    expect(new Set(first).size).toBe(10);
    for (const lease of batch) await lease?.release();
    const again = await slots.acquire("k", { weight: 2 });
    expect(fenceOf(again)).toBeGreaterThan(Math.max(...first));
    await again?.release();

    const fences: number[] = [];
    for (let n = 0; n < 5; n++) {
      const held = await locks.acquire("k");
      fences.push(fenceOf(held));
      await held?.release();
    }
    expectRising(fences);
  });

  it("fences follow the server's clock in microseconds, so an idle id needs no key to remember them", async () => {
    const { slots, locks } = setup();
    const before = Date.now() * 1000;
    const fences = [fenceOf(await slots.acquire("clock")), fenceOf(await locks.acquire("clock"))];
    const after = Date.now() * 1000;
    // The store's clock is this host's (the embedded store's, or a redis-server on this machine): within a minute.
    for (const fence of fences) {
      expect(fence).toBeGreaterThan(before - 60_000_000);
      expect(fence).toBeLessThan(after + 60_000_000);
    }
  });

  it("after a lease lapses, and after the id has been idle long enough for every key to expire, fences still rise", async () => {
    const { slots, locks, prefix } = setup({ leaseMs: 40 });
    const fences = { slots: [fenceOf(await slots.acquire("k"))], locks: [fenceOf(await locks.acquire("k"))] };
    // Never released: the leases lapse (acquire does not renew) and the next caller takes over.
    await eventually(async () => (await slots.stats("k")).used === 0 && !(await locks.stats("k")).held);
    fences.slots.push(fenceOf(await slots.acquire("k")));
    fences.locks.push(fenceOf(await locks.acquire("k")));
    if (redis !== undefined) {
      // Now idle: every key of the id goes with its last lease, the fence's memory included.
      await eventually(async () => (await redis().keys(`*${prefix}*`)).length === 0);
    } else {
      await eventually(async () => (await slots.stats("k")).used === 0 && !(await locks.stats("k")).held);
    }
    fences.slots.push(fenceOf(await slots.acquire("k")));
    fences.locks.push(fenceOf(await locks.acquire("k")));
    expectRising(fences.slots);
    expectRising(fences.locks);
  });

  it("waiters granted in turn get rising fences, whether the grant hands off or is claimed", async () => {
    const { slots, locks, client, prefix } = setup({ limit: 1 });
    const work = (order: number[]) => async (lease: Lease) => {
      order.push(lease.fence);
      await new Promise((resolve) => setTimeout(resolve, 5));
    };
    const semaphoreOrder: number[] = [];
    const holder = await slots.acquire("queue");
    const runs = [0, 1, 2].map(() => slots.run("queue", work(semaphoreOrder), { waitMs: 10_000 }));
    await eventually(async () => (await slots.stats("queue")).waiting === 3);
    await holder?.release();
    await Promise.all(runs);
    expectRising([fenceOf(holder), ...semaphoreOrder]);

    const lockOrder: number[] = [];
    const owner = await locks.acquire("queue");
    const queued = [0, 1, 2].map(() => locks.run("queue", work(lockOrder), { waitMs: 10_000 }));
    // Locks have no waiting count in their stats: give the three joins time to reach the store.
    await eventually(
      async () => (await client.lock.inspect({ storeKey: storeKey(`${prefix}-l`, "lock", "queue") })).waiters.length === 3,
    );
    await owner?.release();
    await Promise.all(queued);
    expectRising([fenceOf(owner), ...lockOrder]);
  });

  if (name === "ioredis") {
    it("SCRIPT FLUSH changes nothing: the last fence lives in the id's keys, not in the scripts", async () => {
      const { slots, locks } = setup();
      const held = await slots.acquire("flush");
      const owned = await locks.acquire("flush");
      await redis?.().script("FLUSH");
      const next = await slots.acquire("flush");
      expect(fenceOf(next)).toBeGreaterThan(fenceOf(held));
      await owned?.release();
      await redis?.().script("FLUSH");
      expect(fenceOf(await locks.acquire("flush"))).toBeGreaterThan(fenceOf(owned));
    });
  }
});

describe("fencing tokens across a Redis restart with persistence (AOF)", () => {
  const dir = mkdtempSync(join(tmpdir(), "leasehold-aof-"));
  const servers: RedisServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(dir, { recursive: true, force: true });
  });
  // Every write reaches the file before Redis answers, so a SIGKILL loses nothing.
  const persistent = ["--appendonly", "yes", "--appendfsync", "always", "--dir", dir];

  it("a killed and restarted server gives fences above every one it gave before, for held and for idle ids", async () => {
    const first = await startRedisServer(persistent);
    servers.push(first);
    const before = new Redis(first.url);
    const prefix = uniquePrefix();
    const slots = semaphore({ client: redisStore(before), limit: 2, prefix: `${prefix}-s` });
    const locks = lock({ client: redisStore(before), prefix: `${prefix}-l`, ttlMs: 60_000 });
    const heldLock = await locks.acquire("held");
    const heldPermit = await slots.acquire("held");
    const idle = await locks.acquire("idle");
    await idle?.release();
    before.disconnect();
    first.process.kill("SIGKILL");
    await new Promise((resolve) => first.process.once("exit", resolve));

    const second = await startRedisServer(persistent, first.port);
    servers.push(second);
    const after = new Redis(second.url);
    try {
      const slotsAfter = semaphore({ client: redisStore(after), limit: 2, prefix: `${prefix}-s` });
      const locksAfter = lock({ client: redisStore(after), prefix: `${prefix}-l`, ttlMs: 60_000 });
      // The lock held before the restart is still held (AOF kept it): nobody else gets it.
      expect(await locksAfter.acquire("held")).toBeNull();
      const permit = await slotsAfter.acquire("held");
      expect(fenceOf(permit)).toBeGreaterThan(fenceOf(heldPermit));
      expect(fenceOf(await locksAfter.acquire("idle"))).toBeGreaterThan(fenceOf(idle));
      // Its holder's token still holds it after the restart; given back, the next holder's fence is above its.
      expect(
        await redisStore(after).lock.release({
          storeKey: storeKey(`${prefix}-l`, "lock", "held"),
          token: (heldLock as Lease).token,
        }),
      ).toBe(true);
      expect(fenceOf(await locksAfter.acquire("held"))).toBeGreaterThan(fenceOf(heldLock));
    } finally {
      after.disconnect();
    }
  });
});
