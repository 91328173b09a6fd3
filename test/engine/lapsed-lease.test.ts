import { describe, expect, it } from "vitest";
import { LockLeaseLostError, lock, memoryStore, redisStore, SemaphoreLeaseLostError, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

// Found by the fencing example: a holder that stalls past its lease without releasing.
// 1. On the embedded store, a waiter of the same process behind it waited for its whole waitMs:
//    a lapsing lease frees nothing by itself, and nothing looked when it lapsed.
// 2. A lease from `acquire` (no `run` renewing it) never aborted its signal: its holder was not
//    told it had lost the lease, even when it asked after the fact.
const stores = [
  { name: "memory", make: () => memoryStore() },
  { name: "redis", make: () => redisStore(newRedis()) },
];

describe.each(stores)("a lease that lapses without being released ($name)", ({ make }) => {
  it("hands its permit to the next waiter when it ends, not when the waiter's wait runs out", async () => {
    const client = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client, limit: 1, prefix: `${prefix}-s`, leaseMs: 200 });
    const locks = lock({ client, prefix: `${prefix}-l`, ttlMs: 200 });
    // The stalled leases start after this: they end 200 ms after it at the earliest (measured from here,
    // not from the waiters' start, which a loaded machine may delay past most of the lease).
    const before = performance.now();
    const stalled = [await slots.acquire("k"), await locks.acquire("k")];
    expect(stalled.every((lease) => lease !== null)).toBe(true);
    const granted = (lease: { waitedMs: number } | null) => {
      expect(lease).not.toBeNull();
      return performance.now() - before;
    };
    const [permit, owned] = await Promise.all([
      slots.acquire("k", { waitMs: 20_000 }).then((lease) => ({ lease, at: granted(lease) })),
      locks.acquire("k", { waitMs: 20_000 }).then((lease) => ({ lease, at: granted(lease) })),
    ]);
    // Granted once the stalled leases ended (200 ms), far before the 20 s wait runs out.
    expect(permit.at).toBeGreaterThanOrEqual(195);
    expect(permit.lease?.waitedMs).toBeLessThan(10_000);
    expect(owned.at).toBeGreaterThanOrEqual(195);
    expect(owned.lease?.waitedMs).toBeLessThan(10_000);
    await permit.lease?.release();
    await owned.lease?.release();
  });

  it("an acquired lease that is not extended aborts its signal at its end; an extended one does not", async () => {
    const client = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client, limit: 2, prefix: `${prefix}-s`, leaseMs: 600 });
    const locks = lock({ client, prefix: `${prefix}-l`, ttlMs: 600 });
    const idle = await slots.acquire("k");
    const kept = await slots.acquire("k");
    const owned = await locks.acquire("k");
    const aborted = new Promise((resolve) => idle?.signal.addEventListener("abort", () => resolve(idle.signal.reason)));
    const renewals = setInterval(() => void kept?.extend(), 100);
    try {
      expect(await aborted).toBeInstanceOf(SemaphoreLeaseLostError);
      expect(kept?.signal.aborted).toBe(false);
      // Asked only after its end: told at once.
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect(owned?.signal.aborted).toBe(true);
      expect(owned?.signal.reason).toBeInstanceOf(LockLeaseLostError);
      expect(await owned?.release()).toBe(false);
    } finally {
      clearInterval(renewals);
      await kept?.release();
    }
  });

  // A regression: the watch stayed armed for the old, later deadline.
  it("a lease extended to a shorter length aborts its signal at the new end, not the old one", async () => {
    const client = make();
    const slots = semaphore({ client, limit: 1, prefix: uniquePrefix(), leaseMs: 60_000 });
    const locks = lock({ client, prefix: uniquePrefix(), ttlMs: 60_000 });
    const leases = [await slots.acquire("k"), await locks.acquire("k")];
    const told = leases.map(
      (lease) => new Promise((resolve) => lease?.signal.addEventListener("abort", () => resolve(lease.signal.reason))),
    );
    for (const lease of leases) expect(await lease?.extend(300)).toBe(true);
    // Told within the test's timeout (the old deadline was a minute away), as a loss.
    const reasons = await Promise.all(told);
    expect(reasons[0]).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(reasons[1]).toBeInstanceOf(LockLeaseLostError);
  }, 20_000);
});
