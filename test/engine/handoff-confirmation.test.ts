import { describe, expect, it } from "vitest";
import { redisStore, type SemaphoreLease, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually, mapCalls } from "../support/stores.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A lease handed off from the queue of `store` (waiter lease 2 s, leaseMs 3 s): reserved, not yet confirmed. */
async function handedOff(store: Store, prefix: string) {
  const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix(prefix), leaseMs: 3_000 });
  const holder = await slots.acquire("k");
  const waiting = slots.acquire("k", { waitMs: 10_000 });
  await eventually(async () => (await slots.stats("k")).waiting === 1);
  await holder?.release();
  const lease = (await waiting) as SemaphoreLease;
  expect(lease).not.toBeNull();
  // Handed off: reserved for at most the waiter lease, not yet a full lease.
  expect((lease as unknown as { deadline: number }).deadline - performance.now()).toBeLessThan(2_000);
  return { slots, lease };
}

/** Past the confirmation's time and past leaseMs after it: nobody else may hold the permit while `signal` is quiet. */
async function nobodyElseAdmitted(slots: ReturnType<typeof semaphore>, lease: SemaphoreLease, signal: AbortSignal) {
  await pause(5_000);
  const other = await slots.acquire("k");
  const overAdmitted = other !== null && !signal.aborted;
  await other?.release();
  await lease.release();
  await slots.close({ graceMs: 0 });
  expect(overAdmitted).toBe(false);
  expect(other).toBeNull();
}

// A regression: a handed-off lease is confirmed by an extend a little after the
// hand-off. When the holder extended it itself before then (extend(ms): it knows its work is long),
// the confirmation still went out, with the factory's leaseMs: it cut the holder's lease back in the
// store, and the holder's signal, watching the deadline the holder's own extend set, aborted only
// then: another caller got the permit while the first still held it, untold.
describe("a handed-off lease the holder extends before its confirmation", () => {
  it("keeps the holder's extend: no confirmation cuts it back, and nobody else is admitted", async () => {
    const { slots, lease } = await handedOff(redisStore(newRedis(), { waiterLeaseMs: 2_000 }), "confirm");
    expect(await lease.extend(60_000)).toBe(true);
    await nobodyElseAdmitted(slots, lease, lease.signal);
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
    const { slots, lease } = await handedOff(store, "confirmf");
    const signal = lease.signal;
    expect(await lease.extend(60_000)).toBe(true);
    await nobodyElseAdmitted(slots, lease, signal);
  }, 20_000);
});
