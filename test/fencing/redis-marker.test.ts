// The last fence of a semaphore is the score of one marker, '~f' at minus the fence (lua/lib/holders.lua), moved
// by the grant's own ZADD. Earlier builds kept it as a member '~f<fence>' at -inf: a key they left must not let a
// fence go backwards (the clock may be behind that fence), and the old member must not outstay the id.
import { describe, expect, it } from "vitest";
import { semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

/** A fence well ahead of the server's clock, as a clock stepped back would leave it. */
async function aheadOfClock(redis: ReturnType<typeof newRedis>): Promise<number> {
  const [seconds, micros] = (await redis.time()) as [number | string, number | string];
  return Number(seconds) * 1_000_000 + Number(micros) + 3_600_000_000;
}

describe("the fence marker on Redis", () => {
  it("sits at minus the last fence, beside the holders, and goes with the last holder", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const key = storeKey(prefix, "semaphore", "k");
    const first = await slots.acquire("k");
    const second = await slots.acquire("k", { weight: 2 });
    expect(second?.fence).toBeGreaterThan(first?.fence ?? Number.POSITIVE_INFINITY);
    expect(Number(await redis.zscore(key, "~f"))).toBe(-(second?.fence ?? 0));
    // Markers never count as permits, and holders are ranged from 0.
    expect(await slots.stats("k")).toMatchObject({ used: 3, holders: 2 });
    await first?.release();
    await second?.release();
    expect(await redis.zscore(key, "~f")).toBeNull();
  });

  it.each([
    ["the fast acquire", {}],
    ["the full acquire", { waitMs: 1_000 }],
  ])("%s reads an old-style marker: its fence rises past it, and the old member goes", async (_, options) => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const key = storeKey(prefix, "semaphore", "k");
    const old = await aheadOfClock(redis);
    await redis.zadd(key, "-inf", `~f${old}`);
    await redis.pexpire(key, 60_000);
    const lease = await slots.acquire("k", options);
    expect(lease?.fence).toBe(old + 1);
    expect(await redis.zrangebyscore(key, "-inf", "-inf")).not.toContain(`~f${old}`);
    expect(Number(await redis.zscore(key, "~f"))).toBe(-(old + 1));
    // The clock has not passed that fence: the key keeps it after the last release, and still expires.
    expect(await lease?.release()).toBe(true);
    expect(Number(await redis.zscore(key, "~f"))).toBe(-(old + 1));
    expect(await redis.pttl(key)).toBeGreaterThan(0);
    expect((await slots.acquire("k"))?.fence).toBe(old + 2);
    await redis.del(key);
  });

  it("a release that empties a key with an old-style marker the clock has passed removes it with the holder", async () => {
    const redis = newRedis();
    const prefix = uniquePrefix();
    const slots = semaphore(redis, { limit: 5, prefix });
    const key = storeKey(prefix, "semaphore", "k");
    const lease = await slots.acquire("k");
    // As if an earlier build had granted it: the marker is the lease's own fence, at -inf.
    await redis.zrem(key, "~f");
    await redis.zadd(key, "-inf", `~f${lease?.fence}`);
    expect(await lease?.release()).toBe(true);
    // Gone at once (the key may keep the id's typical hold for a second), then the key too.
    expect(await redis.zrange(key, "0", "-1")).not.toContain(`~f${lease?.fence}`);
    await eventually(async () => (await redis.exists(key)) === 0);
  });
});
