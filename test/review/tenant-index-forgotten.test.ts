import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

// The Redis store remembers which ids have tenants (to declare their index on the fast paths) in a
// set bounded to 10,000 ids that starts over when full. A tenant lease released after that set
// forgot its id went through semaphore-release-fast.lua without the tenant index: its members were
// removed but its tenant kept counting them, so the tenant stayed "full" with nothing held.
describe("a tenant lease released after the store forgot its id had tenants", () => {
  it("gives its tenant's share back", async () => {
    const store = redisStore(newRedis());
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 10, tenantLimit: 1, prefix });
    const held = await slots.acquire("x", { tenant: "acme" });
    expect(held).not.toBeNull();
    // 10,000 other ids with tenants: the store's memory of tenanted ids starts over.
    const others = semaphore({ client: store, limit: 10, tenantLimit: 1, prefix: `${prefix}-o` });
    for (let i = 0; i < 10_000; i += 500) {
      await Promise.all(
        Array.from({ length: 500 }, (_, j) =>
          others.acquire(`id${i + j}`, { tenant: "t", leaseMs: 60_000 }).then((l) => l?.release()),
        ),
      );
    }
    expect(await held?.release()).toBe(true);
    expect(await slots.stats("x", { tenant: "acme" })).toMatchObject({ used: 0, available: 1 });
    // Nothing is held: acme's one permit is free again.
    const again = await slots.acquire("x", { tenant: "acme" });
    expect(again).not.toBeNull();
    await again?.release();
  }, 60_000);
});
