import { describe, expect, it } from "vitest";
import { lock, memoryStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { mapCalls } from "../support/stores.js";

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
