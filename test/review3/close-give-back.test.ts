import { describe, expect, it } from "vitest";
import { lock, redisStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

// Found by review (#13): redisStore's close() refused every later script call, the give-backs
// included. An acquire sent before close() still answers with a lease (Redis took the permit),
// but its release was refused with ShutdownError: the permit stayed held in Redis for the whole
// lease, for every process, and the semaphore's own close() resolved with it still held. The
// client is the user's and still open (close() never closes it): a release, a return or a leave
// only gives back, so it goes through.
describe("redisStore close() racing a call in flight", () => {
  it("a semaphore lease answered after close() can still be released", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("r3close");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const pending = slots.acquire("k");
    await store.close();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(await lease?.release()).toBe(true);
    expect(await observer.semaphore.stats({ storeKey: `{${prefix}:k}` })).toMatchObject({ used: 0, holders: 0 });
    await slots.close({ graceMs: 0 });
  });

  it("a lock answered after close() can still be released, and the lock is free", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("r3closel");
    const locks = lock({ client: store, prefix });
    const pending = locks.acquire("l");
    await store.close();
    const lease = await pending;
    expect(lease).not.toBeNull();
    expect(await lease?.release()).toBe(true);
    expect(await observer.lock.stats({ storeKey: `{${prefix}:l}` })).toMatchObject({ held: false });
  });

  it("a lease still held when its semaphore closes after the store: its permit comes back", async () => {
    const store = redisStore(newRedis());
    const observer = redisStore(newRedis());
    const prefix = uniquePrefix("r3closes");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const lease = await slots.acquire("k", { leaseMs: 60_000 });
    expect(lease).not.toBeNull();
    await store.close();
    await slots.close({ graceMs: 0 });
    expect(await observer.semaphore.stats({ storeKey: `{${prefix}:k}` })).toMatchObject({ used: 0, holders: 0 });
  });
});
