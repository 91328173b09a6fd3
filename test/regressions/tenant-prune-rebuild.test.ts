// The second form of review 6's order mismatch (found by the model suite once its bursts went through
// a second Redis store: test/model/model.test.ts, `redisElsewhere`). A store that has not seen a tenant
// on an id sends a fail-fast acquire without a tenant alone (nothing else in flight), without the
// tenant index; a call of the same turn with a tenant goes in a call of its own, with the index. When
// the first had to prune a lapsed tenant's permit, the script asked it again (-2), and the second
// call, already sent, was served before it. Now the first prunes without the index and marks the
// index for rebuilding ('~r' in the holders set, lua/lib/holders.lua): both are served in call order, and the next call
// that reads the index rebuilds it from the holders, so the pruned permit is not counted forever.
import { describe, expect, it } from "vitest";
import { type Lease, memoryStore, type SemaphoreLease, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

type Slots = ReturnType<typeof semaphore>;

/** Waits until a lease that nobody renews has lapsed: told by its signal, then seen by the store. */
async function lapsed(slots: Slots, lease: Lease | null, holders: number) {
  await new Promise<void>((resolve) => {
    if (lease?.signal.aborted) resolve();
    else lease?.signal.addEventListener("abort", () => resolve());
  });
  // The holder is told a little before the store's own clock ends the lease.
  while ((await slots.count("k")) !== holders) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function scenario(holder: Slots, fresh: Slots) {
  // Tenant "a" holds both permits; one lease lapses.
  const stale = await holder.acquire("k", { tenant: "a", tenantLimit: 2, leaseMs: 150 });
  const kept = await holder.acquire("k", { tenant: "a", tenantLimit: 2, leaseMs: 60_000 });
  await lapsed(holder, stale, 1);
  // One turn: a call without a tenant (it must prune the lapsed permit to fit), then one of tenant "b".
  const [first, second] = await Promise.all([fresh.acquire("k"), fresh.acquire("k", { tenant: "b", tenantLimit: 2 })]);
  const order = [first !== null, second !== null];
  await first?.release();
  await second?.release();
  // Tenant "a" holds one permit of its two: with one free, it is admitted (a stale index would count two).
  const again = await fresh.acquire("k", { tenant: "a", tenantLimit: 2 });
  const leases = [kept, again].filter((lease): lease is SemaphoreLease => lease !== null);
  await Promise.all(leases.map((lease) => lease.release()));
  return { order, again: again !== null };
}

describe("a fail-fast acquire without the tenant index that prunes a tenant's lapsed permit", () => {
  it("is served in call order, and the index is rebuilt before it is next read, on Redis as in memory", async () => {
    const first = newRedis();
    const second = newRedis();
    const prefix = uniquePrefix();
    try {
      const onRedis = await scenario(semaphore(first, { limit: 2, prefix }), semaphore(second, { limit: 2, prefix }));
      const store = memoryStore();
      const inMemory = await scenario(semaphore(store, { limit: 2 }), semaphore(store, { limit: 2 }));
      expect(inMemory).toEqual({ order: [true, false], again: true });
      expect(onRedis).toEqual(inMemory);
    } finally {
      first.disconnect();
      second.disconnect();
    }
  });
});
