import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { afterEach, describe, expect, it } from "vitest";
import {
  CHANNELS,
  LockLeaseLostError,
  type LostEvent,
  lock,
  SemaphoreLeaseLostError,
  semaphore,
  ValidationError,
} from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { exitOf, killChildren, spawnChild } from "../../support/child.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate, spyStore, storesUnderTest } from "../../support/stores.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Collects the `lost` events published while `body` runs. */
async function lostDuring<T>(body: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; lost: LostEvent[] }> {
  const lost: LostEvent[] = [];
  const listener = (event: unknown) => lost.push(event as LostEvent);
  subscribe(CHANNELS.lost, listener);
  try {
    const [result] = await Promise.allSettled([body()]);
    return { result: result as PromiseSettledResult<T>, lost };
  } finally {
    unsubscribe(CHANNELS.lost, listener);
  }
}

/** Blocks the event loop: no timer can run meanwhile. */
function blockFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

// Issue #27, defect 1: the keeper's first tick was armed by an unref'd setImmediate, which a loop
// blocked in poll (nothing else pending) runs only when some other timer fires: a short lease after
// a long one lapsed mid-body on the embedded store, and a second caller got in. Only a process with
// a quiet event loop shows it (a test worker's is never quiet), hence a child of its own.
describe("lease keeping in a process with nothing else to do", () => {
  afterEach(killChildren);

  it("renews a short lease after a run with the default lease, for semaphores and locks", async () => {
    const child = spawnChild(new URL("../../support/quiet-loop-child.ts", import.meta.url).pathname, {});
    const semaphoreRun = await child.next("semaphore");
    const lockRun = await child.next("lock");
    expect(semaphoreRun).toMatchObject({ secondGotIn: false, outcome: "resolved" });
    expect(lockRun).toMatchObject({ secondGotIn: false, outcome: "resolved" });
    expect((await exitOf(child)).code).toBe(0);
  });
});

describe.each(storesUnderTest)("lease keeping on the $name store", ({ make }) => {
  it("renews every heartbeatMs while the body runs, so a slow body keeps its slot", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const result = await slots.run(
      "k",
      async (lease) => {
        await pause(700);
        expect(lease.signal.aborted).toBe(false);
        return "kept";
      },
      { leaseMs: 300, heartbeatMs: 60 },
    );
    expect(result).toBe("kept");
    // 700 ms at one renewal per 60 ms: several renewals, and the 300 ms lease never lapsed.
    expect(calls.semaphoreExtend).toBeGreaterThanOrEqual(3);
    expect(calls.semaphoreRelease).toBe(1);
  });

  it("defaults the heartbeat to a quarter of the lease", async () => {
    const { store, calls } = spyStore(make());
    const locks = lock({ client: store, prefix: uniquePrefix(), ttlMs: 2_000 });
    const started = performance.now();
    await locks.run("k", () => eventually(() => calls.lockExtend >= 3, 10_000, 5));
    const elapsed = performance.now() - started;
    // Ticks sit on a grid of the heartbeat, the first at least half a heartbeat in, and timers never
    // fire early: three renewals took at least 0.5 + 2 heartbeats of 500 ms, and a half-lease
    // heartbeat (1000 ms) could not have made them before 2500 ms.
    expect(elapsed).toBeGreaterThanOrEqual(1_000);
    expect(elapsed).toBeLessThan(2_500);
  });

  it("a body that ends before the first tick makes no renewal round trip", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    await slots.run("k", async () => "quick");
    const locks = lock({ client: store, prefix: uniquePrefix() });
    await locks.run("k", () => "quick");
    expect(calls.semaphoreExtend).toBe(0);
    expect(calls.lockExtend).toBe(0);
    expect(calls.semaphoreRelease).toBe(1);
    expect(calls.lockRelease).toBe(1);
  });

  it("an explicit heartbeat above half the lease throws ValidationError before a slot is taken", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    await expect(slots.run("k", async () => 1, { leaseMs: 1_000, heartbeatMs: 2_000 })).rejects.toThrow(
      /semaphore heartbeatMs must be at most half of leaseMs \(1000\)/,
    );
    await expect(slots.run("k", async () => 1, { leaseMs: 1_000, heartbeatMs: 501 })).rejects.toBeInstanceOf(ValidationError);
    const locks = lock({ client: store, prefix: uniquePrefix() });
    await expect(locks.run("k", async () => 1, { ttlMs: 1_000, heartbeatMs: 2_000 })).rejects.toThrow(
      /lock heartbeatMs must be at most half of ttlMs \(1000\)/,
    );
    expect(() => lock({ client: store, ttlMs: 1_000, heartbeatMs: 600 })).toThrow(ValidationError);
    // Exactly half is allowed.
    await expect(slots.run("k", async () => 1, { leaseMs: 1_000, heartbeatMs: 500 })).resolves.toBe(1);
    expect(calls.semaphoreAcquire).toBe(1);
    expect(calls.lockAcquire).toBe(0);
  });

  it("heartbeatMs: false turns renewal off but not loss detection", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    let signalReason: unknown;
    const outcome = slots.run(
      "k",
      async (lease) => {
        await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
        signalReason = lease.signal.reason;
        return "finished anyway";
      },
      { leaseMs: 200, heartbeatMs: false },
    );
    await expect(outcome).rejects.toBeInstanceOf(SemaphoreLeaseLostError);
    expect(signalReason).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(calls.semaphoreExtend).toBe(0);
  });

  it("an extend answering 'not ours' aborts the signal with the LeaseLost error, and run rejects although fn resolved", async () => {
    const base = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client: base, limit: 2, prefix });
    const seen = gate<unknown>();
    const outcome = slots.run(
      "k",
      async (lease) => {
        // Someone (an operator, an eviction) removes our entry.
        await base.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "k"), token: lease.token });
        lease.signal.addEventListener("abort", () => seen.open(lease.signal.reason), { once: true });
        await seen.opened;
        return "resolved";
      },
      { leaseMs: 1_000, heartbeatMs: 30 },
    );
    const error = await outcome.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(error).toMatchObject({ key: "k", limit: 2, code: "ERR_SEMAPHORE_LEASE_LOST" });
    expect(await seen.opened).toBe(error);
  });

  it("if fn rejects with the abort reason itself, that error propagates unchanged", async () => {
    const base = make();
    const prefix = uniquePrefix();
    const locks = lock({ client: base, prefix });
    let reason: unknown;
    const error = await locks
      .run(
        "k",
        async (lease) => {
          await base.lock.release({ storeKey: storeKey(prefix, "lock", "k"), token: lease.token });
          await new Promise((_, reject) =>
            lease.signal.addEventListener(
              "abort",
              () => {
                reason = lease.signal.reason;
                reject(lease.signal.reason);
              },
              { once: true },
            ),
          );
        },
        { ttlMs: 1_000, heartbeatMs: 30 },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockLeaseLostError);
    expect(error).toBe(reason);
  });

  it("a body that blocks the event loop past its lease is reported lost, not successful", async () => {
    const { store } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    await expect(
      slots.run(
        "k",
        async () => {
          blockFor(400);
          return "looked fine";
        },
        { leaseMs: 200 },
      ),
    ).rejects.toBeInstanceOf(SemaphoreLeaseLostError);
    const locks = lock({ client: store, prefix: uniquePrefix() });
    await expect(locks.run("k", () => blockFor(400), { ttlMs: 200 })).rejects.toBeInstanceOf(LockLeaseLostError);
  });

  it("one failed renewal is not a loss: the next tick retries, and onRenewError sees each failure", async () => {
    const { store, calls } = spyStore(make(), { semaphoreExtend: (n) => (n <= 2 ? "throw" : undefined) });
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const failures: unknown[] = [];
    const result = await slots.run(
      "k",
      async (lease) => {
        await eventually(() => calls.semaphoreExtend >= 4);
        expect(lease.signal.aborted).toBe(false);
        return "survived";
      },
      { leaseMs: 600, heartbeatMs: 40, onRenewError: (error) => failures.push(error) },
    );
    expect(result).toBe("survived");
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatchObject({ name: "StoreUnavailableError" });
  });

  it("a hook that throws never escapes from the timer", async () => {
    const { store } = spyStore(make(), { lockExtend: () => "throw" });
    const locks = lock({ client: store, prefix: uniquePrefix() });
    let calls = 0;
    await expect(
      locks.run("k", () => pause(900), {
        ttlMs: 400,
        heartbeatMs: 50,
        onRenewError: () => {
          calls++;
          throw new Error("hook bug");
        },
      }),
    ).rejects.toBeInstanceOf(LockLeaseLostError);
    expect(calls).toBeGreaterThanOrEqual(2);
  });

  it("a full lease without a successful renewal is a loss, even when no renewal says 'not ours'", async () => {
    const { store } = spyStore(make(), { semaphoreExtend: () => "hang" }, 150);
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    let abortedDuringBody = false;
    await expect(
      slots.run(
        "k",
        async (lease) => {
          await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
          abortedDuringBody = true;
        },
        { leaseMs: 400, heartbeatMs: 50 },
      ),
    ).rejects.toBeInstanceOf(SemaphoreLeaseLostError);
    expect(abortedDuringBody).toBe(true);
  });

  it("the final release is consulted: a lease lapsed at release time is a loss", async () => {
    const base = make();
    const prefix = uniquePrefix();
    const locks = lock({ client: base, prefix });
    await expect(
      locks.run("k", async (lease) => {
        await base.lock.release({ storeKey: storeKey(prefix, "lock", "k"), token: lease.token });
        return "done";
      }),
    ).rejects.toBeInstanceOf(LockLeaseLostError);
  });

  it("a body that releases early and keeps working past its lease is not a loss: the permit is free at once, one release", async () => {
    const raw = make();
    const { store, calls } = spyStore(raw);
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 1, prefix });
    const leaseMs = 200;
    const seen: { freed?: number; other?: boolean; extendsAtRelease?: number; aborted?: boolean } = {};
    const { result, lost } = await lostDuring(() =>
      slots.run(
        "k",
        async (lease) => {
          expect(await lease.release()).toBe(true);
          seen.extendsAtRelease = calls.semaphoreExtend;
          seen.freed = await slots.count("k");
          // Someone else can take the permit now (on the raw store, so the spy counts only our lease).
          const other = await semaphore({ client: raw, limit: 1, prefix }).acquire("k", { leaseMs: 60_000 });
          seen.other = other !== null;
          await other?.release();
          // The work outlives its lease by far: nothing is kept, so nothing can be lost.
          await pause(leaseMs * 4);
          seen.aborted = lease.signal.aborted;
          return "done";
        },
        { leaseMs, heartbeatMs: 50 },
      ),
    );
    expect(result).toEqual({ status: "fulfilled", value: "done" });
    expect(lost).toEqual([]);
    expect(seen).toMatchObject({ freed: 0, other: true, aborted: false });
    expect(calls.semaphoreRelease).toBe(1);
    // No renewal after the early release.
    expect(calls.semaphoreExtend).toBe(seen.extendsAtRelease);
  });

  it("a lock released early inside run is not a loss either", async () => {
    const { store, calls } = spyStore(make());
    const locks = lock({ client: store, prefix: uniquePrefix() });
    const ttlMs = 200;
    const { result, lost } = await lostDuring(() =>
      locks.run(
        "k",
        async (lease) => {
          expect(await lease.release()).toBe(true);
          expect((await locks.stats("k")).held).toBe(false);
          await pause(ttlMs * 4);
          expect(lease.signal.aborted).toBe(false);
          return 42;
        },
        { ttlMs, heartbeatMs: 50 },
      ),
    );
    expect(result).toEqual({ status: "fulfilled", value: 42 });
    expect(lost).toEqual([]);
    expect(calls.lockRelease).toBe(1);
  });

  it("a release started by the body and still in flight when it returns is the only release round trip", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const { result, lost } = await lostDuring(() =>
      slots.run("k", (lease) => {
        void lease.release();
        return "quick";
      }),
    );
    expect(result).toEqual({ status: "fulfilled", value: "quick" });
    expect(lost).toEqual([]);
    expect(calls.semaphoreRelease).toBe(1);
    expect(await slots.count("k")).toBe(0);
  });

  it("an early release that finds the lease already gone is a loss", async () => {
    const base = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client: base, limit: 1, prefix });
    const { result, lost } = await lostDuring(() =>
      slots.run("k", async (lease) => {
        await base.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "k"), token: lease.token });
        expect(await lease.release()).toBe(false);
        expect(lease.signal.reason).toBeInstanceOf(SemaphoreLeaseLostError);
        return "too late";
      }),
    );
    expect(result.status).toBe("rejected");
    expect((result as PromiseRejectedResult).reason).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(lost).toHaveLength(1);
  });

  it("an early release still in flight when the body returns is waited for: if it finds the lease gone, run rejects", async () => {
    const base = make();
    const prefix = uniquePrefix();
    const locks = lock({ client: base, prefix });
    const { result, lost } = await lostDuring(() =>
      locks.run("k", async (lease) => {
        await base.lock.release({ storeKey: storeKey(prefix, "lock", "k"), token: lease.token });
        void lease.release();
        return "looked fine";
      }),
    );
    expect(result.status).toBe("rejected");
    expect((result as PromiseRejectedResult).reason).toBeInstanceOf(LockLeaseLostError);
    expect(lost).toHaveLength(1);
  });

  it("an early release the store fails to answer leaves the lease kept, and run releases it once the body ends", async () => {
    const { store, calls } = spyStore(make(), { semaphoreRelease: (n) => (n === 1 ? "throw" : undefined) });
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const { result, lost } = await lostDuring(() =>
      slots.run(
        "k",
        async (lease) => {
          await expect(lease.release()).rejects.toThrow(/injected failure/);
          // Still ours: renewals go on, so a body that outlives its lease is not cut.
          const renewed = calls.semaphoreExtend;
          await eventually(() => calls.semaphoreExtend >= renewed + 3);
          return lease.signal.aborted;
        },
        { leaseMs: 1_000, heartbeatMs: 40 },
      ),
    );
    expect(result).toEqual({ status: "fulfilled", value: false });
    expect(lost).toEqual([]);
    expect(calls.semaphoreRelease).toBe(2);
    expect(await slots.count("k")).toBe(0);
  });

  it("a thrown body releases the lease and rethrows its own error", async () => {
    const { store, calls } = spyStore(make());
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    await expect(
      slots.run("k", async () => {
        throw new Error("body failed");
      }),
    ).rejects.toThrow("body failed");
    expect(calls.semaphoreRelease).toBe(1);
    expect(await slots.count("k")).toBe(0);
  });
});
