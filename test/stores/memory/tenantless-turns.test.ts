// The embedded store keeps tenantless waiters in a plain line whose turn's tag lives
// outside the turns heap while no named tenant waits (src/store/memory/queue.ts), and enters the
// heap with that tag when one joins. The tag is not always `virtual + 1` then: a tenant parked with an
// older tag, served later, moves `virtual` back. A tenant joining next must go before the tenantless
// waiter, as in Redis. Entering with `virtual + 1` instead fails here, and passed 300 model sequences.
import { describe, expect, it } from "vitest";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { storesUnderTest } from "../../support/stores.js";

const queue = { waiterLeaseMs: 30_000, maxQueue: 0 };
const LEASE = 30_000;

async function holdersAfter(store: Store, key: string): Promise<string[]> {
  const take = (token: string, tenant?: { limit: number; maxQueue: number }) =>
    store.semaphore.acquire({ storeKey: key, token, limit: 3, weight: 1, leaseMs: LEASE, queue, tenant });
  const capped = { limit: 1, maxQueue: 0 };
  // X holds its cap; its second call waits, parked at the cap, with the turn tagged 1.
  expect((await take("x1@X", capped)).acquired).toBe(true);
  expect((await take("x2@X", capped)).queued).toBe(true);
  // Two tenantless calls are served at once, in turns 1 and 2; a third waits (the id is full), turn 3.
  expect((await take("a1")).acquired).toBe(true);
  expect((await take("a2")).acquired).toBe(true);
  expect((await take("b1")).queued).toBe(true);
  // X's permit returns: its waiter is served in its turn 1 (the last turn served goes back to 1), and
  // X leaves the queue, the tenantless waiter alone in it with its turn 3.
  expect(await store.semaphore.release({ storeKey: key, token: "x1@X", weight: 1 })).toBe(true);
  // Y joins with turn 2, before the tenantless waiter's 3.
  expect((await take("y1@Y", { limit: 3, maxQueue: 0 })).queued).toBe(true);
  // One permit frees: Y's turn comes first.
  expect(await store.semaphore.release({ storeKey: key, token: "a1", weight: 1 })).toBe(true);
  const seen = await store.semaphore.inspect({ storeKey: key });
  return seen.holders.map((holder) => holder.token).sort();
}

describe("tenantless waiters' turn after the last named tenant left", () => {
  for (const under of storesUnderTest.filter((s) => s.name === "memory" || s.name === "ioredis")) {
    it(`${under.name}: a tenant joining next is served before the tenantless waiter`, async () => {
      const holders = await holdersAfter(under.make(), `{${uniquePrefix()}:k}`);
      expect(holders).toEqual(["a2", "x2@X", "y1@Y"]);
    });
  }
});
