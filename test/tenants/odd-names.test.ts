import { describe, expect, it } from "vitest";
import { lock, memoryStore, redisStore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

const STORES: { name: string; make: () => Store }[] = [
  { name: "memory", make: () => memoryStore() },
  { name: "redis", make: () => redisStore(newRedis()) },
];

const ODD = ["a~b", "a b", "a@b", "a.b", "~", "~2", "x~3~", "é✓", "a\\b", "%s", "{x}", "a:b", " "];

describe.each(STORES)("odd tenants and owners ($name)", ({ make }) => {
  it.each(ODD)("tenant %j with weight 2: counted, reported, and freed alike", async (tenant) => {
    const store = make();
    const prefix = uniquePrefix("odd");
    const slots = semaphore({ client: store, limit: 4, prefix, tenantLimit: 2 });
    const a = await slots.acquire("k", { tenant, weight: 2, owner: tenant });
    expect(a).not.toBeNull();
    expect(await slots.acquire("k", { tenant, weight: 1 })).toBeNull();
    const other = await slots.acquire("k", { tenant: `${tenant}x`, weight: 2 });
    expect(other).not.toBeNull();
    expect(await slots.stats("k", { tenant })).toMatchObject({ used: 2 });
    expect(await slots.stats("k")).toMatchObject({ used: 4, tenants: 2 });
    const holders = await slots.holders("k");
    expect(
      holders
        .map((h) => ({ owner: h.owner, tenant: h.tenant, weight: h.weight }))
        .sort((x, y) => (x.tenant ?? "").localeCompare(y.tenant ?? "")),
    ).toEqual(
      [
        { owner: tenant, tenant, weight: 2 },
        { owner: expect.any(String), tenant: `${tenant}x`, weight: 2 },
      ].sort((x, y) => x.tenant.localeCompare(y.tenant)),
    );
    // released through the store directly, as the CLI does
    expect(await store.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "k"), token: a?.token as string })).toBe(true);
    expect(await slots.stats("k", { tenant })).toMatchObject({ used: 0 });
    expect(await slots.stats("k")).toMatchObject({ used: 2, tenants: 1 });
    const again = await slots.acquire("k", { tenant, weight: 2 });
    expect(again).not.toBeNull();
    expect(await a?.extend()).toBe(false);
    await again?.release();
    await other?.release();
    expect(await slots.stats("k")).toMatchObject({ used: 0, tenants: 0 });
  });

  it.each(ODD)("lock owner %j is read back by holder()", async (owner) => {
    const store = make();
    const prefix = uniquePrefix("own");
    const locks = lock({ client: store, prefix });
    const l = await locks.acquire("k", { owner });
    expect(await locks.holder("k")).toMatchObject({ owner, token: l?.token, weight: 1 });
    await l?.release();
    expect(await locks.holder("k")).toBeNull();
  });
});
