import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { lock, redisStore, semaphore } from "../../src/index.js";
import { type KeyKind, storeKey } from "../../src/store/contract/keys.js";
import { parseAnnouncement } from "../../src/store/redis/watch.js";
import { newRedis, redisUrl, uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";
import { startWorker, stopWorkers, timeline, type Worker } from "../support/workers.js";

afterEach(() => stopWorkers());

/** Waits until the id's queue holds `length` waiters: the server has given each its ticket. */
async function queued(redis: Redis, prefix: string, id: string, length: number, kind: KeyKind = "semaphore"): Promise<void> {
  await eventually(async () => (await redis.zcard(`${storeKey(prefix, kind, id)}:q`)) === length, 20_000);
}

describe("waiting across processes (Redis)", () => {
  it("admits waiters of three processes in exactly the order the server queued them", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const workers = await Promise.all([0, 1, 2].map(() => startWorker({ REDIS_URL: redisUrl() })));
    const held = await semaphore(redis, { limit: 1, prefix }).acquire("k");
    const expected: string[] = [];
    // Three rounds over the three processes: A0 B0 C0 A1 ... each queued before the next is sent.
    for (let round = 0; round < 3; round++) {
      for (const [n, worker] of workers.entries()) {
        const label = `${"ABC"[n]}${round}`;
        worker.send({ op: "run", prefix, id: "k", label, waitMs: 30_000, holdMs: 10 });
        expected.push(label);
        await queued(redis, prefix, "k", expected.length);
      }
    }
    await held?.release();
    await eventually(() => workers.every((w) => w.events.filter((e) => e.event === "done").length === 3), 30_000);
    expect(
      timeline(workers)
        .filter((e) => e.event === "enter")
        .map((e) => e.label),
    ).toEqual(expected);
  });

  it("with a limit above one: never more than the limit inside, and grants follow the queue order", async () => {
    const redis = newRedis();
    const listener = newRedis();
    const prefix = uniquePrefix();
    const grants: string[] = [];
    const fences: number[] = [];
    await listener.subscribe(`${storeKey(prefix, "semaphore", "k")}:ch`);
    listener.on("message", (_channel, message: string) => {
      const grant = parseAnnouncement(message, 0);
      grants.push(...grant.tokens);
      fences.push(...grant.fences);
    });
    const workers = await Promise.all([0, 1, 2].map(() => startWorker({ REDIS_URL: redisUrl() })));
    const blockers = semaphore(redis, { limit: 3, prefix });
    const held = [await blockers.acquire("k"), await blockers.acquire("k"), await blockers.acquire("k")];
    const expected: string[] = [];
    for (let round = 0; round < 4; round++) {
      for (const [n, worker] of workers.entries()) {
        const label = `${"ABC"[n]}${round}`;
        worker.send({ op: "run", prefix, id: "k", label, limit: 3, waitMs: 30_000, holdMs: 10 + ((round * 7 + n * 5) % 40) });
        expected.push(label);
        await queued(redis, prefix, "k", expected.length);
      }
    }
    for (const lease of held) await lease?.release();
    await eventually(() => workers.every((w) => w.events.filter((e) => e.event === "done").length === 4), 30_000);

    const events = timeline(workers);
    const labelOf = new Map(events.filter((e) => e.event === "enter").map((e) => [e.token as string, e.label]));
    expect(grants.map((token) => labelOf.get(token))).toEqual(expected);
    // Each grant's fence is newer than the one before, and each holder worked with a fence of its grant or later.
    expect(fences).toEqual([...fences].sort((a, b) => a - b));
    expect(new Set(fences).size).toBe(fences.length);
    const fenceOf = new Map(events.filter((e) => e.event === "enter").map((e) => [e.token as string, e.fence as number]));
    for (const [i, token] of grants.entries()) expect(fenceOf.get(token)).toBeGreaterThanOrEqual(fences[i] as number);
    let inside = 0;
    let most = 0;
    for (const event of events) {
      if (event.event === "enter") most = Math.max(most, ++inside);
      if (event.event === "exit") inside--;
    }
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThan(1);
    expect(await blockers.count("k")).toBe(0);
    await eventually(async () => (await redis.keys(`*${prefix}*`)).length === 0, 15_000);
  });

  it("a waiter whose process is killed does not block the one behind it", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const env = { REDIS_URL: redisUrl(), WAITER_LEASE_MS: "600" };
    const [doomed, patient] = (await Promise.all([startWorker(env), startWorker(env)])) as [Worker, Worker];
    const blockers = semaphore(redis, { limit: 1, prefix });
    const held = await blockers.acquire("k");
    doomed.send({ op: "run", prefix, id: "k", label: "doomed", waitMs: 30_000 });
    await queued(redis, prefix, "k", 1);
    patient.send({ op: "run", prefix, id: "k", label: "patient", waitMs: 30_000 });
    await queued(redis, prefix, "k", 2);
    doomed.kill("SIGKILL");
    await held?.release();
    await eventually(() => patient.events.some((e) => e.event === "done"), 20_000);
    expect(doomed.events.some((e) => e.event === "enter")).toBe(false);
    expect(await blockers.count("k")).toBe(0);
  });

  it("a released lock goes to the next process in line", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const workers = await Promise.all([0, 1].map(() => startWorker({ REDIS_URL: redisUrl() })));
    const held = await lock(redis, { prefix }).acquire("order");
    const expected: string[] = [];
    for (let round = 0; round < 2; round++) {
      for (const [n, worker] of workers.entries()) {
        const label = `${n}-${round}`;
        worker.send({ op: "run", kind: "lock", prefix, id: "order", label, waitMs: 30_000, holdMs: 30 });
        expected.push(label);
        await queued(redis, prefix, "order", expected.length, "lock");
      }
    }
    await held?.release();
    await eventually(() => workers.every((w) => w.events.filter((e) => e.event === "done").length === 2), 30_000);
    expect(
      timeline(workers)
        .filter((e) => e.event === "enter")
        .map((e) => e.label),
    ).toEqual(expected);
  });
});

describe("waiting costs no Redis traffic proportional to wait time", () => {
  let server: RedisServer | undefined;
  afterEach(async () => {
    await server?.stop();
  });

  it("100 waiters that wait 2 s each: a few commands per waiter, not a poll per interval", async () => {
    server = await startRedisServer();
    const client = new Redis(server.url);
    const admin = new Redis(server.url);
    try {
      const store = redisStore(client);
      const slots = semaphore({ client: store, limit: 100, prefix: "cost" });
      const blockers = await Promise.all(Array.from({ length: 100 }, () => slots.acquire("k", { leaseMs: 30_000 })));
      // Load the waiting scripts first: a script's first use by 100 concurrent calls sends each
      // of them its source once (NOSCRIPT, then EVAL), a one-time cost this test is not about.
      await (await slots.acquire("warm-up", { waitMs: 1_000 }))?.release();
      await admin.config("RESETSTAT");
      const started = performance.now();
      const waiters = Array.from({ length: 100 }, () => slots.run("k", async () => {}, { waitMs: 20_000 }));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      for (const lease of blockers) await lease?.release();
      await Promise.all(waiters);
      const waited = performance.now() - started;
      const stats = await admin.info("commandstats");
      // commandstats also counts the commands scripts run inside; count what clients sent.
      const sent = new Set(["evalsha", "eval", "subscribe", "unsubscribe", "ping", "hello", "select", "client"]);
      const calls = [...stats.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)]
        .filter(([, name]) => sent.has(name as string))
        .reduce((sum, [, , count]) => sum + Number(count), 0);
      expect(waited).toBeGreaterThanOrEqual(2_000);
      // Per waiter: join, claim, release (3), plus the blockers' 100 releases, plus a handful of
      // refreshes and subscriptions per process. Polling every 100 ms would be 20+ per waiter.
      expect(calls).toBeLessThan(100 * 3 + 100 + 30);
    } finally {
      client.disconnect();
      admin.disconnect();
    }
  });
});
