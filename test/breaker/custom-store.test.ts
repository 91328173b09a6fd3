// The breaker over custom stores (a store a user writes): its probe, the errors that take a store
// down (only those that say it could not be reached), and a store that throws instead of rejecting.
import { describe, expect, it } from "vitest";
import { lock, memoryStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { eventually, mapCalls } from "../support/stores.js";

/**
 * A custom store over the embedded one, as a user may write (a store over their own service):
 * every call answers after `latencyMs`, and while `failing.on` every call fails as a refused
 * connection does. `timeoutMs` is whatever the user declared.
 */
function remoteLike(timeoutMs: unknown, latencyMs = 10) {
  const inner = memoryStore();
  const failing = { on: false };
  const calls = { inFlight: 0 };
  const remote = mapCalls(inner, (_, real) => async (call: never) => {
    calls.inFlight++;
    try {
      await new Promise((resolve) => setTimeout(resolve, latencyMs));
      if (failing.on) throw new Error("connect ECONNREFUSED 10.0.0.7:7000");
      return real(call);
    } finally {
      calls.inFlight--;
    }
  });
  const store = { ...remote, kind: "remote", timeoutMs };
  return { store: store as unknown as Store, failing, calls };
}

describe("the breaker's probe on a custom store", () => {
  // bounded() ignores a declared timeoutMs a timer cannot hold (Infinity, "5s", 0.5) and uses 2 s;
  // the probe used the raw value: setTimeout(Infinity) fires after 1 ms, before any answer.
  it.each([Number.POSITIVE_INFINITY, "5s", 0.5])(
    "brings the store back up once it answers (timeoutMs %s)",
    async (timeoutMs) => {
      const { store, failing, calls } = remoteLike(timeoutMs);
      const slots = semaphore({ client: store, limit: 2, prefix: "p" });
      expect(await slots.acquire("k")).not.toBeNull();
      failing.on = true;
      await expect(slots.acquire("k")).rejects.toThrow(/ECONNREFUSED/);
      expect((await slots.health()).state).toBe("down");
      // The failed acquire's clean-up (a leave) fails too; then nothing is in flight.
      await eventually(() => calls.inFlight === 0);
      expect((await slots.health()).state).toBe("down");
      failing.on = false;
      // The store answers again: the next probe (250 ms) sees it.
      await eventually(async () => (await slots.health()).state === "up", 5000, 20);
      expect(await slots.acquire("k")).not.toBeNull();
    },
    20_000,
  );
});

// A regression: a custom store that failed on ONE id with an error not shaped like a Redis reply
// (a TypeError from its own code) took the whole store down, and the probe, reading the id that
// failed, kept it down for good. Only errors that say the store could not be reached (network codes,
// the clients' delivery errors, our timeout, LOADING/BUSY/MASTERDOWN/CLUSTERDOWN) take it down now.
describe("a custom store whose calls on one id fail with a non-network error", () => {
  it("does not refuse every other id from then on", async () => {
    const inner = memoryStore();
    const custom = mapCalls(inner, (_, real) => async (call: never) => {
      // A bug in the custom store, reached only by this id's data.
      if ((call as { storeKey: string }).storeKey.includes("poisoned")) {
        throw new TypeError("Cannot read properties of undefined (reading 'limit')");
      }
      return real(call);
    });
    const store: Store = { ...custom, kind: "custom" };
    const slots = semaphore({ client: store, limit: 2, prefix: "p" });
    expect(await slots.acquire("fine")).not.toBeNull();
    await expect(slots.acquire("poisoned")).rejects.toBeInstanceOf(StoreUnavailableError);
    // The store answers every other id; over three seconds (several probes) they must be served.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await slots.health()).state).toBe("up");
    expect(await slots.acquire("fine")).not.toBeNull();
  }, 20_000);
});

/**
 * A custom store that is not async: its methods named in `throwing` throw at once (as a
 * synchronous client does when its connection is gone) instead of returning a rejected promise.
 */
function syncStore() {
  const throwing = new Set<string>();
  const store = mapCalls(memoryStore(), (name, real) => (call: never) => {
    if (throwing.has(name)) throw new Error("connect ECONNREFUSED 10.0.0.7:7000");
    return real(call);
  });
  return { store: { ...store, kind: "sync" }, throwing };
}

// send() exists so that "a custom store need not be async" (src/store/access/bounded.ts); count, stats,
// extend and release called the store bare, so such a store's failure reached the caller as its
// raw error, not StoreUnavailableError, and the breaker never heard of it.
describe("a custom store that throws instead of rejecting", () => {
  it("fails a lock's stats with StoreUnavailableError, and the breaker hears of it", async () => {
    const { store, throwing } = syncStore();
    const locks = lock({ client: store, prefix: "l" });
    throwing.add("lock.stats");
    await expect(locks.stats("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await locks.health()).state).toBe("down");
  });

  it("fails count and semaphore stats with StoreUnavailableError", async () => {
    const { store, throwing } = syncStore();
    const slots = semaphore({ client: store, limit: 2, prefix: "p" });
    throwing.add("semaphore.count");
    await expect(slots.count("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    const other = syncStore();
    other.throwing.add("semaphore.stats");
    await expect(semaphore({ client: other.store, limit: 2 }).stats("k")).rejects.toBeInstanceOf(StoreUnavailableError);
  });

  it("fails extend and release with StoreUnavailableError; a release can be sent again", async () => {
    const { store, throwing } = syncStore();
    const slots = semaphore({ client: store, limit: 2, prefix: "p" });
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    throwing.add("semaphore.extend");
    throwing.add("semaphore.release");
    await expect(lease?.extend()).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(lease?.release()).rejects.toBeInstanceOf(StoreUnavailableError);
    throwing.clear();
    expect(await lease?.release()).toBe(true);
  });
});
