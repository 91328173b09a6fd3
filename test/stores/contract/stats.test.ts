import { describe, expect, it } from "vitest";
import { lock, type SemaphoreLease, semaphore } from "../../../src/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("stats on the $name store", ({ make }) => {
  it("reports limit, used, holders, waiting and available, and agrees with count", async () => {
    const slots = semaphore({ client: make(), limit: 5, prefix: uniquePrefix() });
    expect(await slots.stats("k")).toEqual({ limit: 5, used: 0, holders: 0, waiting: 0, available: 5, tenants: 0 });
    const heavy = await slots.acquire("k", { weight: 3 });
    const light = await slots.acquire("k");
    const waiting = slots.acquire("k", { weight: 2, waitMs: 10_000 });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    expect(await slots.stats("k")).toEqual({ limit: 5, used: 4, holders: 2, waiting: 1, available: 1, tenants: 0 });
    expect((await slots.stats("k")).holders).toBe(await slots.count("k"));
    await heavy?.release();
    const granted = await waiting;
    expect(await slots.stats("k")).toEqual({ limit: 5, used: 3, holders: 2, waiting: 0, available: 2, tenants: 0 });
    await light?.release();
    await granted?.release();
    expect(await slots.stats("k")).toEqual({ limit: 5, used: 0, holders: 0, waiting: 0, available: 5, tenants: 0 });
  });

  it("does not count lapsed holders, weights included", async () => {
    const slots = semaphore({ client: make(), limit: 5, prefix: uniquePrefix() });
    await slots.acquire("k", { weight: 3, leaseMs: 150 });
    const live = await slots.acquire("k", { weight: 2 });
    expect((await slots.stats("k")).used).toBe(5);
    await eventually(async () => (await slots.stats("k")).used === 2);
    expect(await slots.stats("k")).toMatchObject({ holders: 1, available: 3, tenants: 0 });
    await live?.release();
  });

  it("agrees with the history of acquires and releases under concurrent load", async () => {
    const slots = semaphore({ client: make(), limit: 8, prefix: uniquePrefix() });
    let held = 0;
    let heldPermits = 0;
    const mismatches: string[] = [];
    const worker = async (n: number) => {
      for (let round = 0; round < 15; round++) {
        const weight = 1 + ((n + round) % 2);
        const lease: SemaphoreLease | null = await slots.acquire("k", { weight });
        if (lease === null) continue;
        held++;
        heldPermits += weight;
        await new Promise((resolve) => setTimeout(resolve, 1 + (round % 4)));
        held--;
        heldPermits -= weight;
        await lease.release();
      }
    };
    const sampler = (async () => {
      for (let i = 0; i < 30; i++) {
        const stats = await slots.stats("k");
        const count = await slots.count("k");
        if (stats.used > 8 || stats.holders > stats.used || stats.available !== 8 - stats.used)
          mismatches.push(JSON.stringify(stats));
        if (Math.abs(stats.holders - count) > 6) mismatches.push(`count ${count} vs ${stats.holders}`);
      }
    })();
    await Promise.all([...Array.from({ length: 6 }, (_, n) => worker(n)), sampler]);
    expect(mismatches).toEqual([]);
    expect(held).toBe(0);
    expect(heldPermits).toBe(0);
    expect(await slots.stats("k")).toEqual({ limit: 8, used: 0, holders: 0, waiting: 0, available: 8, tenants: 0 });
  });

  it("a lock reports whether it is held and for how long yet", async () => {
    const locks = lock({ client: make(), prefix: uniquePrefix() });
    expect(await locks.stats("k")).toEqual({ held: false, expiresInMs: 0 });
    const lease = await locks.acquire("k", { ttlMs: 10_000 });
    const stats = await locks.stats("k");
    expect(stats.held).toBe(true);
    expect(stats.expiresInMs).toBeGreaterThan(8_000);
    expect(stats.expiresInMs).toBeLessThanOrEqual(10_000);
    await lease?.release();
    expect(await locks.stats("k")).toEqual({ held: false, expiresInMs: 0 });
  });
});
