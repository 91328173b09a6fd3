// Fail-fast calls issued in one turn, on both stores (a regression): answered in the order they were
// issued, each with its own retryAfterMs. The Redis store once reordered them (a coalesced call waited for
// the end of the turn while a call of another lease length went at once; a weighted call took the full
// path a round trip later) and gave every refused caller of a batch the last one's figure.
import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { storesUnderTest } from "../support/stores.js";

describe.each(storesUnderTest)("calls issued in one turn on the $name store", ({ name, make }) => {
  it("four acquires on limit 3, the last with another lease length: the first three are admitted", async () => {
    const slots = semaphore({ client: make(), limit: 3, prefix: uniquePrefix() });
    // One turn, in this order; nothing else happens on the id.
    const leases = await Promise.all([
      slots.acquire("k", { leaseMs: 10_000 }),
      slots.acquire("k", { leaseMs: 10_000 }),
      slots.acquire("k", { leaseMs: 10_000 }),
      slots.acquire("k", { leaseMs: 20_000 }),
    ]);
    // memory: [true, true, true, false]; redis: [true, true, false, true] (the third waited for the end of
    // the turn in the coalescer while the fourth, another group, went at once).
    expect(leases.map((lease) => lease !== null)).toEqual([true, true, true, false]);
    await Promise.all(leases.map((lease) => lease?.release()));
  });

  it("a fail-fast acquire issued before a queued one gets the free permit (another process set the marker)", async () => {
    const prefix = uniquePrefix();
    // Two processes: one holds a heavy lease (which sets the marker), the other has never seen the id.
    const [first, second]: [Store, Store] =
      name === "memory"
        ? (() => {
            const s = make();
            return [s, s];
          })()
        : [redisStore(newRedis()), redisStore(newRedis())];
    const heavy = await semaphore({ client: first, limit: 3, prefix }).acquire("k", { weight: 2 });
    expect(heavy).not.toBeNull();
    const slots = semaphore({ client: second, limit: 3, prefix });
    // One permit is free. Same turn: A fails fast, then B is ready to queue.
    const a = slots.acquire("k");
    const b = slots.acquire("k", { waitMs: 10_000 });
    // memory: A is admitted and B queues behind it. redis: A's fast path meets the marker and goes to the full
    // script one round trip later, after B, which takes the permit; A is refused.
    const leaseA = await a;
    expect(leaseA, "A, issued first while a permit was free, is admitted").not.toBeNull();
    await leaseA?.release();
    const leaseB = await b;
    expect(leaseB).not.toBeNull();
    await leaseB?.release();
    await heavy?.release();
  });

  it("a refused caller in a coalesced batch gets its own retryAfterMs, not a later caller's", async () => {
    const store = make();
    const key = `{${uniquePrefix()}:k}`;
    // X holds the only permit, for 1 s.
    expect((await store.semaphore.acquire({ storeKey: key, token: "X", limit: 1, weight: 1, leaseMs: 1_000 })).acquired).toBe(
      true,
    );
    // One turn, all of one group (limit 1, lease 60 s): Q1 and Q2 go at once, the rest as one batch:
    // Q3 is refused (the nearest lease ends in ~1 s), X's acquire is re-sent (refreshed to 60 s), Q4 is refused.
    const [q1, q2, q3, x, q4] = await Promise.all(
      ["Q1", "Q2", "Q3", "X", "Q4"].map((token) =>
        store.semaphore.acquire({ storeKey: key, token, limit: 1, weight: 1, leaseMs: 60_000 }),
      ),
    );
    expect([q1, q2, q3, x, q4].map((reply) => reply?.acquired)).toEqual([false, false, false, true, false]);
    expect(q4?.retryAfterMs).toBeGreaterThan(50_000);
    // When Q3 was refused, the permit was due back within 1 s: that is its answer (memory: ~1000; redis: ~60000,
    // Q4's answer, because the batch reply carries only the last refusal's figure).
    expect(q3?.retryAfterMs).toBeLessThanOrEqual(1_000);
    await store.semaphore.release({ storeKey: key, token: "X", weight: 1 });
  });
});
