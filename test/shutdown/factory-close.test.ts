import { describe, expect, it } from "vitest";
import { lock, memoryStore, redisStore, ShutdownError, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

/** A store and a second view of it, as another process would have (memory: the same store). */
function stores(): { name: string; make: () => { store: Store; observer: Store } }[] {
  return [
    {
      name: "memory",
      make: () => {
        const store = memoryStore();
        return { store, observer: store };
      },
    },
    { name: "redis", make: () => ({ store: redisStore(newRedis()), observer: redisStore(newRedis()) }) },
  ];
}

const settle = (p: Promise<unknown>) =>
  p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );

describe.each(stores())("close() racing acquisitions ($name)", ({ make }) => {
  it("acquires of every mode started around close(): nothing held, nothing queued once it resolves", async () => {
    const { store, observer } = make();
    const prefix = uniquePrefix("close");
    for (let round = 0; round < 6; round++) {
      const slots = semaphore({ client: store, limit: 3, prefix });
      const locks = lock({ client: store, prefix });
      const ac = new AbortController();
      const calls: ReturnType<typeof settle>[] = [];
      const push = (p: Promise<unknown>) => calls.push(settle(p));
      for (let i = 0; i < 12; i++) {
        push(slots.acquire("s", { weight: 1 + (i % 2) }));
        push(slots.acquire("s", { waitMs: 5_000 }));
        push(slots.acquire("s", { retries: 3, retryDelayMs: 5, signal: ac.signal }));
        push(slots.acquire("s", { waitMs: 5_000, signal: ac.signal, tenant: `t${i % 3}`, tenantLimit: 2 }));
        push(slots.run("s", () => new Promise(() => {}), { waitMs: 5_000 }));
        push(locks.acquire("l", { waitMs: 5_000 }));
        push(locks.run("l", () => new Promise(() => {})));
      }
      // close at a different point each round: before any answer, after some
      for (let k = 0; k < round; k++) await new Promise((r) => setImmediate(r));
      const closing = Promise.all([slots.close({ graceMs: 0 }), locks.close({ graceMs: 0 })]);
      const outcomes = await Promise.all(calls);
      await closing;
      const s = await observer.semaphore.stats({ storeKey: storeKey(prefix, "semaphore", "s") });
      const l = await observer.lock.stats({ storeKey: storeKey(prefix, "lock", "l") });
      expect({ used: s.used, waiting: s.waiting }).toEqual({ used: 0, waiting: 0 });
      expect(l.held).toBe(false);
      expect((await observer.lock.inspect({ storeKey: storeKey(prefix, "lock", "l") })).waiters).toEqual([]);
      expect((await observer.semaphore.inspect({ storeKey: storeKey(prefix, "semaphore", "s") })).waiters).toEqual([]);
      for (const o of outcomes) {
        if (!o.ok && !(o.e instanceof ShutdownError) && !/NotAcquired/.test((o.e as Error).name)) {
          // run with a never-settling body: lost with ShutdownError cause
          expect((o.e as Error).cause).toBeInstanceOf(ShutdownError);
        }
      }
    }
  }, 60_000);

  it("close() on two factories sharing one store: the second keeps working, nothing leaks", async () => {
    const { store, observer } = make();
    const prefix = uniquePrefix("share");
    const a = semaphore({ client: store, limit: 2, prefix });
    const b = semaphore({ client: store, limit: 2, prefix });
    const held = await a.acquire("x");
    expect(held).not.toBeNull();
    const waiting = b.acquire("x", { waitMs: 10_000, weight: 2 });
    await a.close({ graceMs: 0 });
    const got = await waiting;
    expect(got).not.toBeNull();
    expect((await observer.semaphore.stats({ storeKey: storeKey(prefix, "semaphore", "x") })).used).toBe(2);
    expect(await held?.release()).toBe(false);
    expect(await got?.release()).toBe(true);
    await b.close();
    await a.close();
    expect((await observer.semaphore.stats({ storeKey: storeKey(prefix, "semaphore", "x") })).used).toBe(0);
  });

  it("a lease released by its holder while close() takes it back: released once, close resolves", async () => {
    const { store, observer } = make();
    const prefix = uniquePrefix("twice");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const lease = await slots.acquire("x", { weight: 2 });
    const other = semaphore({ client: observer, limit: 2, prefix });
    const closing = slots.close({ graceMs: 0 });
    const [r1] = await Promise.all([lease?.release(), closing]);
    const r2 = await lease?.release();
    expect([r1, r2].filter((r) => r === true).length).toBeLessThanOrEqual(1);
    const next = await other.acquire("x", { weight: 2 });
    expect(next).not.toBeNull();
    await next?.release();
    await other.close();
  });
});

describe.each([
  { name: "memory", client: () => memoryStore() },
  { name: "redis", client: () => newRedis() },
])("a closed factory's readers ($name)", ({ client }) => {
  it("holders() and holder() are refused with ShutdownError, as stats() and count() are", async () => {
    const slots = semaphore({ client: client(), limit: 2 });
    const locks = lock({ client: client() });
    await Promise.all([slots.close(), locks.close()]);
    await expect(slots.stats("k")).rejects.toBeInstanceOf(ShutdownError);
    await expect(slots.holders("k")).rejects.toBeInstanceOf(ShutdownError);
    await expect(locks.holder("k")).rejects.toBeInstanceOf(ShutdownError);
  });
});
