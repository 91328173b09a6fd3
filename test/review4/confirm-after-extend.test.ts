import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually, mapCalls } from "../support/stores.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Found by review 4 (perf-handoff): a handed-off lease is confirmed by an extend halfway to the
// end of its reservation. When the holder extended it itself before then (extend(ms): it knows its
// work is long), the confirmation still went out, with the factory's leaseMs: it cut the holder's
// lease back in the store, and the holder's signal, watching the deadline the holder's own extend
// set, aborted only then: another caller got the permit while the first still held it, untold.
describe("a handed-off lease the holder extends before its confirmation", () => {
  it("keeps the holder's extend: no confirmation cuts it back, and nobody else is admitted", async () => {
    const store = redisStore(newRedis(), { waiterLeaseMs: 2_000 });
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix("r4ext"), leaseMs: 3_000 });
    const holder = await slots.acquire("k");
    const waiting = slots.acquire("k", { waitMs: 10_000 });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    await holder?.release();
    const lease = await waiting;
    expect(lease).not.toBeNull();
    if (lease === null) return;
    // Handed off: reserved for at most the waiter lease, not yet a full lease.
    expect((lease as unknown as { deadline: number }).deadline - performance.now()).toBeLessThan(2_000);
    expect(await lease.extend(60_000)).toBe(true);
    const signal = lease.signal;
    // Past the reservation's halfway (the confirmation's time) and past leaseMs after it.
    await pause(5_000);
    const other = await slots.acquire("k");
    const overAdmitted = other !== null && !signal.aborted;
    await other?.release();
    await lease.release();
    await slots.close({ graceMs: 0 });
    expect(overAdmitted).toBe(false);
    expect(other).toBeNull();
  }, 20_000);
});

// The same, when the holder's extend is still unanswered at the confirmation's time: it had landed
// in the store, the confirmation (leaseMs) landed after it and cut it back, and the holder's answer,
// read last, set the deadline the holder's extend asked for: the client counted 60 s, the store 3.
describe("a handed-off lease whose holder's extend is in flight at the confirmation's time", () => {
  it("is not cut back by the confirmation: nobody else is admitted", async () => {
    const inner = redisStore(newRedis(), { waiterLeaseMs: 2_000 });
    const store = mapCalls(inner, (name, real) => async (call: never) => {
      const answer = await real(call);
      // The holder's own extend: it reaches the store at once, its answer comes back late.
      if (name === "semaphore.extend" && (call as { leaseMs: number }).leaseMs === 60_000) await pause(1_500);
      return answer;
    });
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix("r4extf"), leaseMs: 3_000 });
    const holder = await slots.acquire("k");
    const waiting = slots.acquire("k", { waitMs: 10_000 });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    await holder?.release();
    const lease = await waiting;
    expect(lease).not.toBeNull();
    if (lease === null) return;
    expect((lease as unknown as { deadline: number }).deadline - performance.now()).toBeLessThan(2_000);
    const signal = lease.signal;
    expect(await lease.extend(60_000)).toBe(true);
    await pause(5_000);
    const other = await slots.acquire("k");
    const overAdmitted = other !== null && !signal.aborted;
    await other?.release();
    await lease.release();
    await slots.close({ graceMs: 0 });
    expect(overAdmitted).toBe(false);
    expect(other).toBeNull();
  }, 20_000);
});
