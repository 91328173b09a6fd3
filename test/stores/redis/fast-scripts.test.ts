// The fast scripts serve one weight-1 take with room, and one weight-1 release that reports no hold,
// on a straight line ahead of their loop (lua/semaphore-acquire-fast.lua, semaphore-release-fast.lua); the loop
// serves the same call sent in its long form (five arguments per acquire, three per release). Both
// must answer the same and leave the same members and expiry, whatever markers the set holds.
import { describe, expect, it } from "vitest";
import { memoryStore, redisStore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { scripts } from "../../../src/store/redis/lua.generated.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";

type Client = ReturnType<typeof newRedis>;
const take = scripts.semaphoreAcquireFast;
const back = scripts.semaphoreReleaseFast;

/** The set's members by name, scores aside (fences and lease ends differ between two keys). */
async function members(redis: Client, key: string): Promise<string[]> {
  return (await redis.zrange(key, "0", "-1")).sort();
}

/** Whether the key has an expiry (-2: gone, -1: none, else ms left). */
async function expiry(redis: Client, key: string): Promise<"gone" | "none" | "set"> {
  const ms = await redis.pttl(key);
  return ms === -2 ? "gone" : ms === -1 ? "none" : "set";
}

/** Markers as the set may hold them before a call: the fence, the typical hold, tenants, other holders. */
const setups: [string, (redis: Client, key: string) => Promise<void>][] = [
  ["a new key", async () => {}],
  ["a fence marker alone", async (redis, key) => void (await redis.zadd(key, "-1", "~f"))],
  [
    "a typical hold that counts",
    async (redis, key) => {
      const [seconds] = (await redis.time()) as [number | string, number | string];
      await redis.zadd(key, "-inf", `~h40:${Number(seconds) * 1000 + 60_000}`);
    },
  ],
  ["a tenants marker", async (redis, key) => void (await redis.zadd(key, "-inf", "~t"))],
  ["another holder", async (redis, key) => void (await redis.zadd(key, "99999999999999", "other"))],
  ["a lapsed holder", async (redis, key) => void (await redis.zadd(key, "1", "lapsed"))],
];

describe("the fast scripts' straight lines agree with their loops", () => {
  it.each(setups)("on %s: take, release, release again", async (_, setup) => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const short = `{${prefix}:short}`;
    const long = `{${prefix}:long}`;
    for (const key of [short, long]) {
      await setup(redis, key);
      if ((await redis.exists(key)) === 1) await redis.pexpire(key, 60_000);
    }

    const fence = await redis.eval(take.source, 1, short, "tok", 5, 30_000);
    const looped = (await redis.eval(take.source, 1, long, "tok", 5, 30_000, 1, 0)) as number[];
    expect(typeof fence).toBe("number");
    expect(looped[0]).toBe(0);
    expect(await members(redis, short)).toEqual(await members(redis, long));
    expect(await expiry(redis, short)).toBe("set");
    expect(await expiry(redis, long)).toBe("set");
    expect(Number(await redis.zscore(short, "~f"))).toBe(-(fence as number));

    for (let round = 0; round < 2; round++) {
      // Live the first time, gone the second: the same answer from both forms.
      const answer = await redis.eval(back.source, 1, short, "tok");
      const answers = (await redis.eval(back.source, 1, long, "tok", 1, -1)) as number[];
      expect([answer]).toEqual(answers);
      expect(answer).toBe(round === 0 ? 1 : 0);
      expect(await members(redis, short)).toEqual(await members(redis, long));
      expect(await expiry(redis, short)).toBe(await expiry(redis, long));
    }
    await redis.del(short, long);
  });

  it("a release on a set holding only its fence marker takes the key away, as the loop does", async () => {
    const redis = newRedis();
    const key = `{${uniquePrefix()}:k}`;
    await redis.eval(take.source, 1, key, "tok", 5, 30_000);
    expect(await members(redis, key)).toEqual(["tok", "~f"]);
    // The clock has passed the fence by the time the release runs (its TIME is a later reading).
    expect(await redis.eval(back.source, 1, key, "tok")).toBe(1);
    expect(await redis.exists(key)).toBe(0);
  });

  it("a lapsed lease's release answers 0 on the straight line, and its permit goes", async () => {
    const redis = newRedis();
    const key = `{${uniquePrefix()}:k}`;
    await redis.eval(take.source, 1, key, "tok", 5, 30_000);
    // Lapsed: its end moved into the past, as if the lease had run out.
    await redis.zadd(key, "XX", "1", "tok");
    expect(await redis.eval(back.source, 1, key, "tok")).toBe(0);
    expect(await redis.zscore(key, "tok")).toBeNull();
    await redis.del(key);
  });
});

// The fast scripts' straight lines (one weight-1 take, one weight-1 release without a hold
// or tenant) on a lease that lapsed: the release answers false (the lease was lost), an extend too,
// on the Redis store as on the memory store; and a lapsed lease's permit is taken again by the next
// caller, never counted twice.

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("lapsed leases through the fast scripts' straight lines", () => {
  it.each(["memory", "redis"])("release and extend answer false once a lease lapsed (%s)", async (kind) => {
    const store: Store = kind === "redis" ? redisStore(newRedis()) : memoryStore();
    const storeKey = `{${uniquePrefix()}:k}`;
    const take = (token: string, leaseMs: number) => store.semaphore.acquire({ storeKey, token, limit: 2, weight: 1, leaseMs });
    expect((await take("a", 40)).acquired).toBe(true);
    expect((await take("keep", 60_000)).acquired).toBe(true);
    // Past a's lease end (40 ms), with a wide margin.
    await pause(120);
    expect(await store.semaphore.release({ storeKey, token: "a", weight: 1 })).toBe(false);
    expect(await store.semaphore.extend({ storeKey, token: "a", leaseMs: 1_000, weight: 1 })).toBe(false);
    // Its permit is free again: one newcomer fits, not two.
    expect((await take("b", 60_000)).acquired).toBe(true);
    expect((await take("c", 60_000)).acquired).toBe(false);
    expect(await store.semaphore.stats({ storeKey })).toMatchObject({ used: 2, holders: 2 });
    // The last lease lapsing alone: the key's own expiry, then a release of it.
    expect(await store.semaphore.release({ storeKey, token: "b", weight: 1 })).toBe(true);
    expect(await store.semaphore.release({ storeKey, token: "keep", weight: 1 })).toBe(true);
    expect((await take("d", 30)).acquired).toBe(true);
    await pause(120);
    expect(await store.semaphore.release({ storeKey, token: "d", weight: 1 })).toBe(false);
    expect(await store.semaphore.stats({ storeKey })).toMatchObject({ used: 0, holders: 0 });
  });
});
