import { describe, expect, it } from "vitest";
import { memoryStore, redisStore, ShutdownError } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

// Found by review (#13): the two stores disagreed on a wrapper made with Object.create(store). The
// memory store binds its methods, so the wrapper's close() closes the store. The Redis store's
// close() set `closed` on the wrapper alone: the groups (closures over the store) kept sending
// every call, while the store's shared subscriber was closed under it; only `watch` through the
// wrapper was refused. And a spread of redisStore() had no `watch` or `close` at all (they were on
// its prototype), where a spread of memoryStore() has both.
const settle = (p: unknown): Promise<string> =>
  Promise.resolve(p).then(
    () => "answered",
    (error: unknown) => (error instanceof ShutdownError ? "shut down" : String(error)),
  );

describe.each([
  { name: "memory", make: (): Store => memoryStore() },
  { name: "redis", make: (): Store => redisStore(newRedis()) },
])("close() through a wrapper of the $name store", ({ make }) => {
  it("Object.create(store): closing the wrapper closes the store, and every later acquire is refused", async () => {
    const inner = make();
    const wrapper = Object.create(inner) as Store;
    await wrapper.close?.();
    const storeKey = `{${uniquePrefix("r3wc")}:k}`;
    const call = { storeKey, token: "t", limit: 1, weight: 1, leaseMs: 1000 };
    expect({
      wrapper: await settle(wrapper.semaphore.acquire(call)),
      store: await settle(inner.semaphore.acquire(call)),
      lock: await settle(wrapper.lock.acquire({ storeKey, token: "t", leaseMs: 1000 })),
    }).toEqual({ wrapper: "shut down", store: "shut down", lock: "shut down" });
  });

  it("a spread of the store keeps watch and close", async () => {
    const inner = make();
    const spread = { ...inner } as Store;
    expect([typeof spread.watch, typeof spread.close]).toEqual(["function", "function"]);
    const stop = await spread.watch({ storeKey: `{${uniquePrefix("r3ws")}:k}`, onGrant: () => {} });
    stop();
    await spread.close?.();
    await expect(inner.semaphore.count({ storeKey: "{x:y}" })).rejects.toBeInstanceOf(ShutdownError);
  });
});
