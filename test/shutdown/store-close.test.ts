import { describe, expect, it } from "vitest";
import { lock, memoryStore, redisStore, ShutdownError, semaphore } from "../../src/index.js";
import { storeKey as keyOf } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

// Issue #13: redisStore's close() refused every later script call, the give-backs
// included. An acquire sent before close() still answers with a lease (Redis took the permit),
// but its release was refused with ShutdownError: the permit stayed held in Redis for the whole
// lease, for every process, and the semaphore's own close() resolved with it still held. The
// client is the user's and still open (close() never closes it): a release, a return or a leave
// only gives back, so it goes through.
describe("redisStore close() racing a call in flight", () => {
  it("a semaphore lease answered after close() can still be released", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("close");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const pending = slots.acquire("k");
    await store.close();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(await lease?.release()).toBe(true);
    expect(await observer.semaphore.stats({ storeKey: keyOf(prefix, "semaphore", "k") })).toMatchObject({ used: 0, holders: 0 });
    await slots.close({ graceMs: 0 });
  });

  it("a lock answered after close() can still be released, and the lock is free", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("closel");
    const locks = lock({ client: store, prefix });
    const pending = locks.acquire("l");
    await store.close();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(await lease?.release()).toBe(true);
    expect(await observer.lock.stats({ storeKey: keyOf(prefix, "lock", "l") })).toMatchObject({ held: false });
  });

  it("a lease still held when its semaphore closes after the store: its permit comes back", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("closes");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const lease = await slots.acquire("k", { leaseMs: 60_000 });
    expect(lease).not.toBeNull();
    await store.close();
    await slots.close({ graceMs: 0 });
    expect(await observer.semaphore.stats({ storeKey: keyOf(prefix, "semaphore", "k") })).toMatchObject({ used: 0, holders: 0 });
  });
});

// Issue #13 too: a waiter queued when its store closes was not told.
// Every refresh of its room failed with ShutdownError and was taken for a passing failure, so the
// waiter sat out its whole waitMs and answered null (wait-timeout). A closed store answers nothing
// any more: the room ends its waits with that error at the next refresh, and each waiter leaves the
// queue (a leave still goes out after close).
describe("redisStore close() with a waiter queued", () => {
  it("ends the wait with ShutdownError long before waitMs, and leaves no waiter in Redis", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("closew");
    const storeKey = keyOf(prefix, "semaphore", "k");
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k", { leaseMs: 60_000 });
    expect(holder).not.toBeNull();
    const waiting = slots.acquire("k", { waitMs: 60_000 });
    const outcome = waiting.then(
      (lease) => ({ lease }),
      (error: unknown) => ({ error }),
    );
    await eventually(async () => (await observer.semaphore.stats({ storeKey })).waiting === 1);
    await store.close();
    const ended = await outcome;
    expect("error" in ended && ended.error).toBeInstanceOf(ShutdownError);
    await eventually(async () => (await observer.semaphore.stats({ storeKey })).waiting === 0);
    expect(await holder?.release()).toBe(true);
    expect(await observer.semaphore.stats({ storeKey })).toMatchObject({ used: 0, holders: 0, waiting: 0 });
  });
});

// The embedded store's counterpart: a waiter of this process queued when memoryStore().close()
// runs used to re-check the emptied store every millisecond until its waitMs ended (then null).
// Its store now tells it, from inside close().
describe("memoryStore close() with a waiter queued", () => {
  it("ends a semaphore's and a lock's waits with ShutdownError from inside close()", async () => {
    const store = memoryStore();
    const slots = semaphore({ client: store, limit: 1 });
    const locks = lock({ client: store });
    expect(await slots.acquire("k", { leaseMs: 60_000 })).not.toBeNull();
    expect(await locks.acquire("l", { ttlMs: 60_000 })).not.toBeNull();
    const outcomes = [slots.acquire("k", { waitMs: 60_000 }), locks.acquire("l", { waitMs: 60_000 })].map((waiting) =>
      waiting.then(
        (lease) => ({ lease }),
        (error: unknown) => ({ error }),
      ),
    );
    expect((await slots.stats("k")).waiting).toBe(1);
    await store.close();
    const ended = await Promise.all(outcomes);
    for (const outcome of ended) expect("error" in outcome && outcome.error).toBeInstanceOf(ShutdownError);
  });
});

// Issue #13: the two stores disagreed on a wrapper made with Object.create(store). The
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
    const storeKey = `{${uniquePrefix("wc")}:k}`;
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
    const stop = await spread.watch({ storeKey: `{${uniquePrefix("ws")}:k}`, onGrant: () => {} });
    stop();
    await spread.close?.();
    await expect(inner.semaphore.count({ storeKey: "{x:y}" })).rejects.toBeInstanceOf(ShutdownError);
  });
});
