// Grants to waiters keep the limit and the stores' hygiene: regression tests
// for the holes issue #11 reported in the waiting room (items 1-5 and 10). The model-based suite (test/model) explores the same rules
// over random interleavings; these pin each reported case down by name.
import { describe, expect, it } from "vitest";
import { semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { Inspection, Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

/** A waiter whose process has died: it joined the queue and will never refresh or claim. */
async function deadWaiter(store: Store, key: string, token: string, weight: number, limit: number, waiterLeaseMs: number) {
  const reply = await store.semaphore.acquire({
    storeKey: key,
    token,
    limit,
    weight,
    leaseMs: 60_000,
    queue: { waiterLeaseMs, maxQueue: 0 },
  });
  expect(reply).toMatchObject({ acquired: false, queued: true });
}

const entry = (inspection: Inspection, token: string) =>
  [...inspection.holders, ...inspection.waiters].find((candidate) => candidate.token === token);

describe.each(storesUnderTest)("grants on the $name store", ({ make, redis }) => {
  /** Every key of the semaphore has an expiry, and none lapses before `atLeastMs` from now. */
  const everyKeyExpires = async (prefix: string, atLeastMs: number) => {
    if (redis === undefined) return;
    const keys = await redis().keys(`{${prefix}:*`);
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      const ttl = await redis().pttl(key);
      expect(ttl, `${key} has no expiry`).toBeGreaterThan(0);
      expect(ttl, `${key} lapses before what it holds`).toBeGreaterThanOrEqual(atLeastMs);
    }
  };

  it("a grant made by an acquire that refuses its own caller keeps every key's expiry, and the limit", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const key = storeKey(prefix, "semaphore", "k");
    const slots = semaphore({ client: store, limit: 3, prefix });
    await slots.acquire("k", { weight: 2, leaseMs: 150 }); // crashes: never released
    await deadWaiter(store, key, "w", 3, 3, 3_000);
    await eventually(async () => (await slots.stats("k")).used === 0);
    // A fail-fast caller meets the queue: its acquire grants the waiter, then refuses the caller.
    expect(await slots.acquire("k")).toBeNull();
    expect((await store.semaphore.inspect({ storeKey: key })).holders.map((h) => h.token)).toEqual(["w"]);
    await everyKeyExpires(prefix, 1_000);
    // The waiter claims its grant; the three permits are its own, and nobody else gets one.
    expect(
      await store.semaphore.acquire({
        storeKey: key,
        token: "w",
        limit: 3,
        weight: 3,
        leaseMs: 60_000,
        queue: { waiterLeaseMs: 3_000, maxQueue: 0 },
      }),
    ).toMatchObject({
      acquired: true,
    });
    await everyKeyExpires(prefix, 50_000);
    expect(await slots.acquire("k")).toBeNull();
    expect(await slots.acquire("k")).toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: 3, holders: 1 });
    expect(await store.semaphore.release({ storeKey: key, token: "w", weight: 3 })).toBe(true);
  });

  it("a dead waiter's unclaimed grant leaves no phantom permits and no keys behind", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const key = storeKey(prefix, "semaphore", "k");
    const slots = semaphore({ client: store, limit: 3, prefix });
    await slots.acquire("k", { leaseMs: 150 }); // crashes
    await deadWaiter(store, key, "dead", 3, 3, 400);
    await eventually(async () => (await slots.stats("k")).used === 0);
    expect(await slots.acquire("k")).toBeNull(); // grants the dead waiter
    expect(await slots.stats("k")).toMatchObject({ used: 3, holders: 1, waiting: 0 });
    // Its reservation lapses with its waiter lease: nothing is left held, nothing left stored.
    await eventually(async () => (await slots.stats("k")).holders === 0);
    expect(await slots.stats("k")).toEqual({ limit: 3, used: 0, holders: 0, waiting: 0, available: 3, tenants: 0 });
    if (redis !== undefined) await eventually(async () => (await redis().keys(`{${prefix}:*`)).length === 0);
    const leases = [await slots.acquire("k"), await slots.acquire("k"), await slots.acquire("k")];
    expect(leases.every((lease) => lease !== null)).toBe(true);
    expect(await slots.acquire("k")).toBeNull();
    for (const lease of leases) await lease?.release();
  });

  it("a waiter is granted only within the limit it asked for, whoever makes the grant", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 3, prefix });
    const a = await slots.acquire("k");
    const b = await slots.acquire("k");
    let granted = false;
    const strict = slots.acquire("k", { limit: 1, waitMs: 10_000 }).then((lease) => {
      granted = true;
      return lease;
    });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    // A caller passing limit 3 meets the queue: 2 held + 1 fits its limit, not the waiter's.
    expect(await slots.acquire("k")).toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: 2, holders: 2, waiting: 1 });
    await a?.release();
    // 1 held + 1 is still above the waiter's limit of 1: nothing granted.
    expect(await slots.stats("k")).toMatchObject({ used: 1, holders: 1, waiting: 1 });
    expect(granted).toBe(false);
    await b?.release();
    const lease = await strict;
    expect(lease).toMatchObject({ limit: 1, weight: 1 });
    expect(await slots.stats("k")).toMatchObject({ used: 1, holders: 1, waiting: 0 });
    await lease?.release();
  });

  it("a grant is reserved no longer than the waiter's own lease has left: a dead waiter blocks one waiter lease at most", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const key = storeKey(prefix, "semaphore", "k");
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    await deadWaiter(store, key, "dead", 1, 1, 2_000);
    await eventually(async () => (entry(await store.semaphore.inspect({ storeKey: key }), "dead")?.expiresInMs ?? 2_000) < 1_700);
    const left = entry(await store.semaphore.inspect({ storeKey: key }), "dead")?.expiresInMs ?? 0;
    await holder?.release(); // grants the dead waiter
    const reserved = entry(await store.semaphore.inspect({ storeKey: key }), "dead");
    expect((await store.semaphore.inspect({ storeKey: key })).holders.map((h) => h.token)).toEqual(["dead"]);
    expect(reserved?.expiresInMs).toBeLessThanOrEqual(left);
  });

  it("a claimed grant frees its permit when the claimer's own, shorter lease lapses", async () => {
    const store = make({ waiterLeaseMs: 5_000 });
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const waiting = slots.acquire("k", { waitMs: 10_000, leaseMs: 150 });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    await holder?.release();
    const claimed = await waiting; // crashes: never released
    expect(claimed).not.toBeNull();
    await eventually(async () => (await slots.count("k")) === 0);
    const next = await slots.acquire("k");
    expect(next).not.toBeNull();
    await next?.release();
  });
});
