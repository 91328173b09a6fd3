// A lock at the millisecond its lease ends (a regression). Redis keeps a key through the millisecond of
// its PXAT (a key is expired once now > at), so a script that reads TIME == at still finds it, while the
// memory store and the model say a lease is over at now >= its end. The lock scripts therefore set
// PXAT = end - 1, and the clock harness of the model-based suite expires keys by Redis's own rule
// (test/model/time.ts), which these tests use.
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../../src/store/memory/index.js";
import { createRedisStore } from "../../../src/store/redis/index.js";
import { scriptsOnTestClock, TestTime } from "../../model/time.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";

describe("a lock at the millisecond its lease ends", () => {
  it("redis keeps a key alive for a script whose TIME equals the key's PXAT (the premise, on the real clock)", async () => {
    const redis = newRedis();
    const key = `{${uniquePrefix()}:probe}`;
    const probe = `local t = redis.call('TIME')
      return {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), redis.call('EXISTS', KEYS[1])}`;
    let seen = 0;
    for (let round = 0; round < 50 && seen < 5; round++) {
      const [start] = (await redis.eval(probe, 1, key)) as [number, number];
      const at = start + 10;
      await redis.set(key, "v", "PXAT", at);
      for (;;) {
        const [ms, exists] = (await redis.eval(probe, 1, key)) as [number, number];
        if (ms === at) {
          seen++;
          expect(exists, "a key read by a script at TIME == PXAT").toBe(1);
        }
        if (ms > at) break;
      }
    }
    expect(seen).toBeGreaterThan(0);
  });

  it("a holder cannot extend a lock whose lease has ended (memory: false; redis: true at the last millisecond)", async () => {
    const redis = newRedis();
    const time = new TestTime();
    await time.start(redis);
    const prefix = uniquePrefix();
    const key = `{${prefix}:l}`;
    const memory = createMemoryStore({}, time.memoryClock);
    const store = createRedisStore(redis, {}, scriptsOnTestClock);
    expect((await memory.lock.acquire({ storeKey: key, token: "A", leaseMs: 300 })).acquired).toBe(true);
    expect((await store.lock.acquire({ storeKey: key, token: "A", leaseMs: 300 })).acquired).toBe(true);
    // The clock reaches A's lease end exactly; keys expire as real Redis expires them (now > at).
    await time.advance(300, redis, `{${prefix}:*`);
    expect(await memory.lock.extend({ storeKey: key, token: "A", leaseMs: 300 })).toBe(false);
    expect(await store.lock.extend({ storeKey: key, token: "A", leaseMs: 300 }), "redis extends a lease that has ended").toBe(
      false,
    );
  });

  it("redis answers stats 'free' and acquire 'held' in the same millisecond", async () => {
    const redis = newRedis();
    const time = new TestTime();
    await time.start(redis);
    const prefix = uniquePrefix();
    const key = `{${prefix}:l}`;
    const store = createRedisStore(redis, {}, scriptsOnTestClock);
    const memory = createMemoryStore({}, time.memoryClock);
    expect((await store.lock.acquire({ storeKey: key, token: "A", leaseMs: 300 })).acquired).toBe(true);
    expect((await memory.lock.acquire({ storeKey: key, token: "A", leaseMs: 300 })).acquired).toBe(true);
    await time.advance(300, redis, `{${prefix}:*`);
    expect(await store.lock.stats({ storeKey: key })).toEqual({ held: false, expiresInMs: 0 });
    expect(await memory.lock.stats({ storeKey: key })).toEqual({ held: false, expiresInMs: 0 });
    // The memory store (and the model) admit B now; redis refuses it, while its own stats said free.
    expect((await memory.lock.acquire({ storeKey: key, token: "B", leaseMs: 300 })).acquired).toBe(true);
    expect(
      (await store.lock.acquire({ storeKey: key, token: "B", leaseMs: 300 })).acquired,
      "redis: B acquires a lock its stats call free",
    ).toBe(true);
  });
});
