import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync } from "node:fs";
import calculateSlot from "cluster-key-slot";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it, vi } from "vitest";
import { luaSource } from "../../../scripts/lua-source.mjs";
import { lock, redisStore, StoreUnavailableError, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { SemaphoreAcquireCall, Store } from "../../../src/store/index.js";
import { scripts } from "../../../src/store/redis/lua.generated.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";
import { freePort, type RedisServer, startRedisServer } from "../../support/redis-server.js";
import { eventually, mapCalls } from "../../support/stores.js";

const servers: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function ownServer(extra: string[] = []): Promise<RedisServer> {
  const server = await startRedisServer(extra);
  servers.push(server);
  return server;
}

async function serverNowMs(redis: Redis): Promise<number> {
  const [seconds, micros] = (await redis.time()) as [number | string, number | string];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

describe("redis store", () => {
  it("scores holders by lease expiry on the Redis server's clock, whatever the client's clock says", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 2, prefix });
    const skewed = vi.spyOn(Date, "now").mockReturnValue(Date.now() + 3_600_000);
    try {
      const lease = await slots.acquire("k", { leaseMs: 10_000 });
      const score = Number(await redis.zscore(storeKey(prefix, "semaphore", "k"), lease?.token ?? ""));
      const now = await serverNowMs(redis);
      expect(score).toBeGreaterThan(now + 8_000);
      expect(score).toBeLessThanOrEqual(now + 10_000);
      expect(await slots.count("k")).toBe(1);
      await lease?.release();
    } finally {
      skewed.mockRestore();
    }
  });

  it("runs every script from lua/ by SHA, and recovers from SCRIPT FLUSH", async () => {
    const files = readdirSync(new URL("../../../lua", import.meta.url)).filter((name) => name.endsWith(".lua"));
    const embedded = Object.values(scripts);
    expect(embedded.map((script) => script.name).sort()).toEqual(files.sort());
    for (const script of embedded) {
      expect(script.source).toBe(luaSource(script.name));
      expect(script.source).not.toContain("--!include");
      expect(script.sha).toBe(createHash("sha1").update(script.source).digest("hex"));
    }
    const redis = newRedis();
    const slots = semaphore(redis, { limit: 1, prefix: uniquePrefix() });
    const first = await slots.acquire("k");
    await first?.release();
    expect(await redis.script("EXISTS", scripts.semaphoreAcquireFast.sha)).toEqual([1]);
    await redis.script("FLUSH");
    const second = await slots.acquire("k");
    expect(second).not.toBeNull();
    expect(await second?.extend()).toBe(true);
    expect(await second?.release()).toBe(true);
  });

  it("keys and values travel as KEYS/ARGV: ids full of quotes and Lua syntax are just ids", async () => {
    const redis = newRedis();
    const slots = semaphore(redis, { limit: 1, prefix: uniquePrefix() });
    const nasty = `'"]]--[[ return redis.call('FLUSHALL') ]]`;
    const lease = await slots.acquire(nasty);
    expect(lease).not.toBeNull();
    expect(await slots.acquire(nasty)).toBeNull();
    expect(await slots.count(nasty)).toBe(1);
    await lease?.release();
  });

  it("every key of one semaphore shares a Redis Cluster hash slot, whatever the id holds", async () => {
    const redis = newRedis();
    for (const id of ["plain", "{tag}", "a}b{c", "}leading", "trailing{", "a:b:c", "with spaces", "ünïcødé-日本-🚀"]) {
      const prefix = uniquePrefix();
      const slots = semaphore(redis, { limit: 3, prefix });
      const leases = [await slots.acquire(id, { weight: 2 }), await slots.acquire(id)];
      // A waiter makes the waiting room's keys: the holders set, the meta hash, the queue, its leases, the turns.
      const waiting = slots.acquire(id, { waitMs: 10_000 });
      await eventually(async () => (await redis.keys(`*${prefix}*`)).length === 5);
      const keys = await redis.keys(`*${prefix}*`);
      expect(new Set(keys.map((key) => calculateSlot(key))).size).toBe(1);
      for (const lease of leases) await lease?.release();
      await (await waiting)?.release();
      // All gone but the holders set, which keeps the id's typical hold (a marker) for a few holds.
      expect(await redis.keys(`*${prefix}*`)).toEqual([storeKey(prefix, "semaphore", id)]);
      expect(await redis.zcount(storeKey(prefix, "semaphore", id), "0", "+inf")).toBe(0);
    }
  });

  it("idle keys expire by themselves: no sweeper, nothing left after the last lease lapses", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const locks = lock(redis, { prefix });
    await slots.acquire("k", { leaseMs: 300, weight: 2 });
    await slots.acquire("k", { leaseMs: 200 });
    await locks.acquire("l", { ttlMs: 200 });
    const holders = storeKey(prefix, "semaphore", "k");
    expect(await redis.pttl(holders)).toBeGreaterThan(0);
    expect(await redis.pttl(holders)).toBeLessThanOrEqual(301);
    await eventually(async () => (await redis.keys(`*${prefix}*`)).length === 0);
  });

  it("the fail-fast path keeps the key alive for its latest lease: a shorter lease never lowers the TTL", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const holders = storeKey(prefix, "semaphore", "k");
    await slots.acquire("k", { leaseMs: 5_000 });
    const first = await redis.pttl(holders);
    expect(first).toBeGreaterThan(4_000);
    expect(first).toBeLessThanOrEqual(5_001);
    await slots.acquire("k", { leaseMs: 200 });
    expect(await redis.pttl(holders)).toBeGreaterThan(4_000);
    await slots.acquire("k", { leaseMs: 20_000 });
    expect(await redis.pttl(holders)).toBeGreaterThan(19_000);
    // Only the one-key fast path ran: no waiting-room or meta key was ever made.
    expect((await redis.keys(`*${prefix}*`)).sort()).toEqual([holders]);
    await redis.del(holders);
  });

  it("a heavier holder's permits are members of the holders set; the last holder's release leaves only the typical hold, for a few holds", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const heavy = await slots.acquire("k", { weight: 3 });
    const light = await slots.acquire("k");
    // One key holds every permit (no other key could be lost, evicted or expire apart from it).
    expect(await redis.keys(`*${prefix}*`)).toEqual([storeKey(prefix, "semaphore", "k")]);
    // Members at positive scores are permits; markers sit at negative ones (lua/lib/holders.lua).
    expect(await redis.zcount(storeKey(prefix, "semaphore", "k"), "0", "+inf")).toBe(4);
    await heavy?.release();
    expect(await redis.zcount(storeKey(prefix, "semaphore", "k"), "0", "+inf")).toBe(1);
    await light?.release();
    // The id's typical hold (lua/lib/hold.lua) stays, alone, for max(1 s, 4 holds) at most; then nothing.
    expect(await redis.zrange(storeKey(prefix, "semaphore", "k"), "0", "-1")).toEqual([expect.stringMatching(/^~h\d+:\d+$/)]);
    expect(await redis.pttl(storeKey(prefix, "semaphore", "k"))).toBeLessThanOrEqual(1_000);
    await eventually(async () => (await redis.keys(`*${prefix}*`)).length === 0);
  });

  it("a release hands its grant to its own process's waiters in its reply, without waiting for pub/sub", async () => {
    const redis = newRedis();
    // A subscriber that subscribes but never delivers a message: pub/sub stays silent.
    const deaf = Object.assign(Object.create(redis), {
      duplicate: () => {
        const subscriber = redis.duplicate();
        const on = subscriber.on.bind(subscriber);
        return Object.assign(subscriber, {
          on: (event: string, listener: (...args: unknown[]) => void) => (event === "message" ? subscriber : on(event, listener)),
        });
      },
    });
    // A long waiter lease: its periodic refresh (a third of it) cannot wake anyone within this test.
    const inner = redisStore(deaf, { waiterLeaseMs: 60_000 });
    // Counts refreshes that have answered: the first one, right after subscribing, ends the room's set-up.
    let refreshed = 0;
    const store = mapCalls(inner, (name, real) =>
      name.endsWith(".refreshWaiters")
        ? async (call: never) => {
            const answer = await real(call);
            refreshed++;
            return answer;
          }
        : real,
    );
    const prefix = uniquePrefix();
    for (const [name, primitive] of [
      ["semaphore", semaphore({ client: store, limit: 1, prefix })],
      ["lock", lock({ client: store, prefix })],
    ] as const) {
      const holder = await primitive.acquire(name);
      const before = refreshed;
      const waiting = primitive.acquire(name, { waitMs: 5_000 });
      // The waiter has joined, its room has subscribed and its first refresh has answered "waiting":
      // from here only the release can wake it in time.
      await eventually(() => refreshed > before);
      const released = performance.now();
      await holder?.release();
      const lease = await waiting;
      expect(lease).not.toBeNull();
      // Well inside waitMs: woken by the release's reply, not by a timer.
      expect(performance.now() - released).toBeLessThan(2_500);
      await lease?.release();
    }
    redis.disconnect();
  });

  it("an unreachable Redis rejects with StoreUnavailableError within the bound, never the client's offline retry", async () => {
    const port = await freePort();
    const redis = newRedis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: null });
    const slots = semaphore(redisStore(redis, { timeoutMs: 300 }), { limit: 1 });
    const started = performance.now();
    const error = await slots.run("k", async () => "never").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/did not answer acquire within 300 ms/);
    expect(await slots.acquire("k").catch((e: unknown) => e)).toBeInstanceOf(StoreUnavailableError);
    // Bounded: far below ioredis's own retry budget (maxRetriesPerRequest: null would wait forever).
    expect(performance.now() - started).toBeLessThan(5_000);
    const byDefault = semaphore(redis, { limit: 1 });
    await expect(byDefault.acquire("k")).rejects.toThrow(/within 2000 ms/);
  });

  it("an acquire whose answer is lost is released in the background: no ghost lease", async () => {
    const server = await ownServer();
    const redis = newRedis(server.url);
    const admin = newRedis(server.url);
    const prefix = uniquePrefix();
    const slots = semaphore(redisStore(redis, { timeoutMs: 200 }), { limit: 1, prefix });
    // The server stops answering for a while: the acquire is queued, runs later, and its answer is too late.
    await admin.client("PAUSE", 800, "ALL");
    const error = await slots.acquire("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    await eventually(
      async () =>
        (await admin.exists(storeKey(prefix, "semaphore", "k"))) === 0 && (await slots.count("k").catch(() => -1)) === 0,
    );
    // The acquire did run once the pause ended (the cleanup, queued behind it, undid it).
    const stats = await admin.info("commandstats");
    expect(stats).toMatch(/cmdstat_evalsha:calls=\d+/);
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it("a garbled or failing store reply is an unknown outcome: the token is released", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const real = redisStore(redis);
    // The real store underneath, with an acquire that runs and then answers nonsense.
    const garbled: Store = Object.assign(Object.create(real) as Store, {
      kind: "garbled",
      semaphore: {
        ...real.semaphore,
        acquire: async (call: SemaphoreAcquireCall) => {
          await real.semaphore.acquire(call);
          return { acquired: "yes" } as never;
        },
      },
    });
    const slots = semaphore(garbled, { limit: 1, prefix });
    await expect(slots.acquire("k")).rejects.toThrow(/not a valid reply/);
    await eventually(async () => (await real.semaphore.count({ storeKey: storeKey(prefix, "semaphore", "k") })) === 0);
  });

  it("survives a server restart: scripts reload after NOSCRIPT and held leases are reported gone", async () => {
    const server = await ownServer();
    const redis = newRedis(server.url);
    const slots = semaphore(redis, { limit: 1, prefix: uniquePrefix() });
    const before = await slots.acquire("k");
    expect(before).not.toBeNull();
    await server.stop();
    const restarted = await startRedisServer([], server.port);
    servers.push(restarted);
    await eventually(async () => redis.status === "ready");
    expect(await before?.extend()).toBe(false);
    expect(before?.signal.aborted).toBe(true);
    const after = await slots.acquire("k");
    expect(after).not.toBeNull();
    await after?.release();
  });

  it("accepts a promise of a client, a factory, and a factory that fails once", async () => {
    const prefix = uniquePrefix();
    const viaPromise = semaphore({ client: Promise.resolve(newRedis()), limit: 1, prefix });
    const lease = await viaPromise.acquire("k");
    expect(lease).not.toBeNull();
    let made = 0;
    const viaFactory = semaphore({
      client: async () => {
        made++;
        if (made === 1) throw new Error("not yet");
        return newRedis();
      },
      limit: 1,
      prefix,
    });
    await expect(viaFactory.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    // Same Redis, same key: the permit is taken.
    expect(await viaFactory.acquire("k")).toBeNull();
    expect(made).toBe(2);
    await lease?.release();
    expect(await viaFactory.count("k")).toBe(0);
  });
});

describe("memory store", () => {
  it("keeps no process alive: a script holding a long lease exits by itself", async () => {
    const code = `
      import { semaphore, lock } from "./src/index.ts";
      const slots = semaphore({ limit: 1 });
      await slots.acquire("k", { leaseMs: 600000 });
      await lock().acquire("k", { ttlMs: 600000 });
      console.log("held");
    `;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], { cwd: process.cwd() });
    let output = "";
    child.stdout.on("data", (data) => {
      output += data;
    });
    const exitCode = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(output.trim()).toBe("held");
    expect(exitCode).toBe(0);
  });
});
