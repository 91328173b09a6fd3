// The last fence of a semaphore is the score of one marker, '~f' at minus the fence (lua/lib/holders.lua), moved
// by the grant's own ZADD.
import { describe, expect, it } from "vitest";
import { semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

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
});
