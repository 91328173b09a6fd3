import { describe, expect, it } from "vitest";
import { redisStore } from "../../../src/index.js";
import type { SemaphoreAcquireCall, SemaphoreReleaseCall } from "../../../src/store/index.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";

// Issue #13: the Redis fast path hands the caller's own call object to the coalescer,
// which reads it when the batch is sent, at the end of the turn (and again, after a round trip,
// when the fast script sends the call on to the full one). A caller that reuses or changes its
// object after the call returned changed what was sent: two acquires with the tokens t3 and t4
// both went out as t4, both answered "acquired", and the semaphore admitted more than its limit
// (t3 holds nothing; its release frees nothing, t4's lease is shared by two callers).
describe("the Redis store reads a call's fields when it is made", () => {
  it("an acquire object reused in the same turn: each call takes its own token", async () => {
    const store = redisStore(newRedis());
    const storeKey = `{${uniquePrefix("reuse")}:k}`;
    const base = { storeKey, limit: 3, weight: 1, leaseMs: 30_000 };
    // Two calls out at once: the next ones of this turn on the id are gathered into one batch.
    const first = store.semaphore.acquire({ ...base, token: "t1" });
    const second = store.semaphore.acquire({ ...base, token: "t2" });
    const reused: SemaphoreAcquireCall = { ...base, token: "t3" };
    const third = store.semaphore.acquire(reused);
    reused.token = "t4";
    const fourth = store.semaphore.acquire(reused);
    const replies = await Promise.all([first, second, third, fourth]);
    const admitted = replies.filter((reply) => reply.acquired).length;
    const inspection = await store.semaphore.inspect({ storeKey });
    const holders = inspection.holders.map((holder) => holder.token).sort();
    // Limit 3: three callers admitted, each holding its own permit; the fourth refused.
    expect({ admitted, holders }).toEqual({ admitted: 3, holders: ["t1", "t2", "t3"] });
    await store.close();
  });

  it("a release object changed after the call: the token it was made with is released", async () => {
    const store = redisStore(newRedis());
    const storeKey = `{${uniquePrefix("rel")}:k}`;
    const base = { storeKey, limit: 5, weight: 1, leaseMs: 30_000 };
    for (const token of ["a", "b", "c", "d"]) expect((await store.semaphore.acquire({ ...base, token })).acquired).toBe(true);
    const first = store.semaphore.release({ storeKey, token: "a", weight: 1 });
    const second = store.semaphore.release({ storeKey, token: "b", weight: 1 });
    const call: SemaphoreReleaseCall = { storeKey, token: "c", weight: 1 };
    const third = store.semaphore.release(call);
    call.token = "nobody";
    expect(await Promise.all([first, second, third])).toEqual([true, true, true]);
    const inspection = await store.semaphore.inspect({ storeKey });
    expect(inspection.holders.map((holder) => holder.token)).toEqual(["d"]);
    await store.close();
  });
});
