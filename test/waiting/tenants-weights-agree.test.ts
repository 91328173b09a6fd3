// A guard on the full-path acquire, which reuses the permit count of its first grant
// for the second (lua/semaphore-acquire.lua `used`, lib/grant.lua `known`) and reads the id's limit once.
// 40 waiters of three capped tenants with weights 1-3 on a limit of 16, released round by round: the
// Redis store must grant the same callers in the same rounds as the embedded store, never over 16.
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { memoryStore, type SemaphoreLease, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

const clients: Redis[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});
const plan = Array.from({ length: 40 }, (_, i) => ({
  weight: 1 + ((i * 7) % 3),
  tenant: i % 3 === 0 ? "a" : i % 3 === 1 ? "b" : "c",
}));
const caps: Record<string, number> = { a: 6, b: 9, c: 4 };

async function rounds(slots: ReturnType<typeof semaphore>) {
  const held = new Map<number, SemaphoreLease>();
  const order: number[][] = [];
  const all = plan.map((p, i) =>
    slots
      .acquire("k", { weight: p.weight, tenant: p.tenant, tenantLimit: caps[p.tenant] as number, waitMs: 20_000 })
      .then((l) => {
        if (l !== null) held.set(i, l);
      }),
  );
  let done = 0;
  const settled = Promise.all(all).then(() => {
    done = 1;
  });
  for (let r = 0; r < 12 && done === 0; r++) {
    await eventually(async () => {
      const s = await slots.stats("k");
      return s.used === [...held.keys()].reduce((x, i) => x + (plan[i]?.weight ?? 0), 0) && s.holders === held.size;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = [...held.keys()].sort((a, b) => a - b);
    order.push(now);
    const used = now.reduce((x, i) => x + (plan[i]?.weight ?? 0), 0);
    expect(used).toBeLessThanOrEqual(16);
    const ls = [...held.values()];
    held.clear();
    await Promise.all(ls.map((l) => l.release()));
  }
  await settled;
  return order;
}

describe("waits with tenants and weights", () => {
  it("memory and redis grant in the same rounds", async () => {
    const redis = newRedis();
    clients.push(redis);
    const r = await rounds(semaphore(redis, { limit: 16, prefix: uniquePrefix() }));
    const m = await rounds(semaphore(memoryStore(), { limit: 16 }));
    expect(r).toEqual(m);
  });
});
