// Review 6 (found while probing the 16-item batches; predated this session, fixed in lua/semaphore-acquire-fast.lua).
// On an id where a tenant holds, a Redis store that has not yet seen a tenant there sends a
// fail-fast acquire without a tenant (the first of a turn) without the tenant index; the script answers -2 ("tenants hold: ask again with the
// index") and the store re-sends it (redis/fast.ts). The re-sent call goes out only when the answer is
// back, after every later call of the same turn: it is served last. With one permit short, the first
// caller is refused while a later one is admitted; the embedded store admits in call order. The two
// stores disagree, and fail-fast admission is not first come, first served. (The -2 answer is gone
// since: a call without the index prunes and marks the index for rebuilding, test/regressions/tenant-prune-rebuild.test.ts.)
import { describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

async function admittedIn(holder: ReturnType<typeof semaphore>, fresh: ReturnType<typeof semaphore>) {
  const held = await holder.acquire("k", { tenant: "a", tenantLimit: 1 });
  // 16 calls in one turn for the 15 permits left, the first without a tenant, the others of tenant "b"
  // (sent with the index): the last one should be refused.
  const leases = await Promise.all(
    Array.from({ length: 16 }, (_, i) => fresh.acquire("k", i === 0 ? {} : { tenant: "b", tenantLimit: 16 })),
  );
  const admitted = leases.flatMap((lease, i) => (lease === null ? [] : [i]));
  await Promise.all([held, ...leases].map((lease) => lease?.release()));
  return admitted;
}

describe("fail-fast acquires on an id where a tenant holds", () => {
  it("admit in call order on Redis, as on the embedded store", async () => {
    const first = newRedis();
    const second = newRedis();
    const prefix = uniquePrefix();
    const onRedis = await admittedIn(semaphore(first, { limit: 16, prefix }), semaphore(second, { limit: 16, prefix }));
    const store = memoryStore();
    const inMemory = await admittedIn(semaphore(store, { limit: 16 }), semaphore(store, { limit: 16 }));
    first.disconnect();
    second.disconnect();
    expect(inMemory).toEqual(Array.from({ length: 15 }, (_, i) => i));
    expect(onRedis).toEqual(inMemory);
  });
});
