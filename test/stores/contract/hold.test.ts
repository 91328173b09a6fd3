// The id's typical hold (issue #15 part 4): every process's releases record how long leases were
// held, in the id's own keys, and every refusal gives it back, so a process that has seen no lease
// end answers as one that has. The exact rules (the average, how long a record counts) are checked
// against the model (test/model); these are the engine's figures.
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { LockNotAcquiredError, lock, SemaphoreNotAcquiredError, semaphore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { storesUnderTest } from "../../support/stores.js";

/** How long the observed leases are held: the test waits at least this long, so each hold is at least this. */
const HOLD_MS = 300;
const LEASE_MS = 60_000;

describe.each(storesUnderTest)("the typical hold on the $name store", ({ name, make, redis }) => {
  /** Two processes on one store: a new store object on the same Redis (memory: one process, one store). */
  const stores = (): [Store, Store] => {
    const first = make();
    return [first, name === "memory" ? first : make()];
  };

  it("a fresh process's first refusal of a semaphore says the hold another observed, not the lease", async () => {
    const [first, second] = stores();
    const prefix = uniquePrefix();
    const warm = semaphore({ client: first, limit: 1, prefix, leaseMs: LEASE_MS });
    await warm.run("k", () => sleep(HOLD_MS));
    // Held again, by the warm process: a fresh one (its own factory) is refused.
    const held = await warm.acquire("k");
    const fresh = semaphore({ client: second, limit: 1, prefix, leaseMs: LEASE_MS });
    const refused = await fresh.run("k", () => "no").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SemaphoreNotAcquiredError);
    const { holdMs, expiresInMs, retryAfterMs } = refused as SemaphoreNotAcquiredError;
    expect(holdMs).toBeGreaterThanOrEqual(HOLD_MS);
    // Generous: the hold is HOLD_MS plus a round trip, far below the lease.
    expect(holdMs).toBeLessThan(10_000);
    expect(expiresInMs).toBeGreaterThan(LEASE_MS - 10_000);
    expect(retryAfterMs).toBe(holdMs);
    await held?.release();
  });

  it("a fresh process's first refusal of a lock says the hold another observed, not the ttl", async () => {
    const [first, second] = stores();
    const prefix = uniquePrefix();
    const warm = lock({ client: first, prefix, ttlMs: LEASE_MS });
    await warm.run("k", () => sleep(HOLD_MS));
    const held = await warm.acquire("k");
    const refused = await lock({ client: second, prefix, ttlMs: LEASE_MS })
      .run("k", () => "no")
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LockNotAcquiredError);
    const { holdMs, expiresInMs, retryAfterMs } = refused as LockNotAcquiredError;
    expect(holdMs).toBeGreaterThanOrEqual(HOLD_MS);
    expect(holdMs).toBeLessThan(10_000);
    expect(expiresInMs).toBeGreaterThan(LEASE_MS - 10_000);
    expect(retryAfterMs).toBe(holdMs);
    await held?.release();
  });

  it("with no hold observed anywhere, retryAfterMs is the 1 s default, not the lease; the lease end stays in expiresInMs", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore({ client: make(), limit: 1, prefix, leaseMs: LEASE_MS });
    const held = await slots.acquire("k");
    const refused = (await slots.run("k", () => "no").catch((error: unknown) => error)) as SemaphoreNotAcquiredError;
    expect(refused).toMatchObject({ holdMs: undefined, retryAfterMs: 1000 });
    expect(refused.expiresInMs).toBeGreaterThan(LEASE_MS - 10_000);
    const locks = lock({ client: make(), prefix, ttlMs: LEASE_MS });
    const locked = await locks.acquire("l");
    const busy = (await locks.run("l", () => "no").catch((error: unknown) => error)) as LockNotAcquiredError;
    expect(busy).toMatchObject({ holdMs: undefined, retryAfterMs: 1000 });
    expect(busy.expiresInMs).toBeGreaterThan(LEASE_MS - 10_000);
    await held?.release();
    await locked?.release();
  });

  it("never later than the nearest lease end: a lease ending before the default caps retryAfterMs", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore({ client: make(), limit: 1, prefix, leaseMs: 400 });
    const held = await slots.acquire("k");
    const refused = (await slots.run("k", () => "no").catch((error: unknown) => error)) as SemaphoreNotAcquiredError;
    expect(refused.holdMs).toBeUndefined();
    expect(refused.expiresInMs).toBeLessThanOrEqual(400);
    expect(refused.retryAfterMs).toBe(refused.expiresInMs);
    await held?.release();
  });

  it("a queued caller whose wait ran out gets the typical hold too", async () => {
    const [first, second] = stores();
    const prefix = uniquePrefix();
    const warm = semaphore({ client: first, limit: 1, prefix, leaseMs: LEASE_MS });
    await warm.run("k", () => sleep(HOLD_MS));
    const held = await warm.acquire("k");
    const refused = (await semaphore({ client: second, limit: 1, prefix, leaseMs: LEASE_MS })
      .run("k", () => "no", { waitMs: 100 })
      .catch((error: unknown) => error)) as SemaphoreNotAcquiredError;
    expect(refused).toMatchObject({ reason: "wait-timeout" });
    expect(refused.holdMs).toBeGreaterThanOrEqual(HOLD_MS);
    expect(refused.retryAfterMs).toBe(refused.holdMs);
    await held?.release();
  });

  it("only a live lease's release counts: a lapsed one's, or one that does not say its hold, records nothing", async () => {
    const store = make();
    const key = `{${uniquePrefix()}:k}`;
    expect((await store.semaphore.acquire({ storeKey: key, token: "a", limit: 2, weight: 1, leaseMs: 100 })).acquired).toBe(true);
    await sleep(150);
    expect(await store.semaphore.release({ storeKey: key, token: "a", weight: 1, heldMs: 120 })).toBe(false);
    expect((await store.semaphore.acquire({ storeKey: key, token: "b", limit: 1, weight: 1, leaseMs: LEASE_MS })).acquired).toBe(
      true,
    );
    expect(await store.semaphore.release({ storeKey: key, token: "b", weight: 1 })).toBe(true);
    expect((await store.semaphore.acquire({ storeKey: key, token: "c", limit: 1, weight: 1, leaseMs: LEASE_MS })).acquired).toBe(
      true,
    );
    const refused = await store.semaphore.acquire({ storeKey: key, token: "d", limit: 1, weight: 1, leaseMs: LEASE_MS });
    expect(refused).toMatchObject({ acquired: false });
    expect(refused.holdMs).toBeUndefined();
    // A live one's does.
    expect(await store.semaphore.release({ storeKey: key, token: "c", weight: 1, heldMs: 250 })).toBe(true);
    expect((await store.semaphore.acquire({ storeKey: key, token: "e", limit: 1, weight: 1, leaseMs: LEASE_MS })).acquired).toBe(
      true,
    );
    expect(await store.semaphore.acquire({ storeKey: key, token: "f", limit: 1, weight: 1, leaseMs: LEASE_MS })).toMatchObject({
      acquired: false,
      holdMs: 250,
    });
    await store.semaphore.release({ storeKey: key, token: "e", weight: 1 });
  });

  it("the record lives in the id's keys and goes with them: never past the lease whose release wrote it", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const [semKey, lockKey] = [`{${prefix}:s}`, `{${prefix}:l}`];
    // Leases of 300 ms, released at once: each record counts until its lease's end at the latest.
    expect((await store.semaphore.acquire({ storeKey: semKey, token: "a", limit: 1, weight: 1, leaseMs: 300 })).acquired).toBe(
      true,
    );
    expect(await store.semaphore.release({ storeKey: semKey, token: "a", weight: 1, heldMs: 5 })).toBe(true);
    expect((await store.lock.acquire({ storeKey: lockKey, token: "a", leaseMs: 300 })).acquired).toBe(true);
    expect(await store.lock.release({ storeKey: lockKey, token: "a", heldMs: 5 })).toBe(true);
    // Idle, yet the record counts: a holder's refusal still says it.
    expect((await store.semaphore.acquire({ storeKey: semKey, token: "b", limit: 1, weight: 1, leaseMs: 60 })).acquired).toBe(
      true,
    );
    expect(await store.semaphore.acquire({ storeKey: semKey, token: "c", limit: 1, weight: 1, leaseMs: 60 })).toMatchObject({
      acquired: false,
      holdMs: 5,
    });
    expect((await store.lock.acquire({ storeKey: lockKey, token: "b", leaseMs: 60 })).acquired).toBe(true);
    expect(await store.lock.acquire({ storeKey: lockKey, token: "c", leaseMs: 60 })).toMatchObject({
      acquired: false,
      holdMs: 5,
    });
    await sleep(400);
    // Past the released leases' ends: forgotten, and on Redis no key is left.
    if (redis !== undefined) expect(await redis().keys(`{${prefix}:*`)).toEqual([]);
    expect(
      (await store.semaphore.acquire({ storeKey: semKey, token: "d", limit: 1, weight: 1, leaseMs: LEASE_MS })).acquired,
    ).toBe(true);
    expect(
      (await store.semaphore.acquire({ storeKey: semKey, token: "e", limit: 1, weight: 1, leaseMs: LEASE_MS })).holdMs,
    ).toBeUndefined();
    expect((await store.lock.acquire({ storeKey: lockKey, token: "d", leaseMs: LEASE_MS })).acquired).toBe(true);
    expect((await store.lock.acquire({ storeKey: lockKey, token: "e", leaseMs: LEASE_MS })).holdMs).toBeUndefined();
    await store.semaphore.release({ storeKey: semKey, token: "d", weight: 1 });
    await store.lock.release({ storeKey: lockKey, token: "d" });
  });
});
