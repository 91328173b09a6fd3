// review8: the fast scripts' straight lines (one weight-1 take, one weight-1 release without a hold
// or tenant) on a lease that lapsed: the release answers false (the lease was lost), an extend too,
// on the Redis store as on the memory store; and a lapsed lease's permit is taken again by the next
// caller, never counted twice.
import { describe, expect, it } from "vitest";
import { memoryStore, redisStore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("review8: lapsed leases through the fast scripts' straight lines", () => {
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
