import { describe, expect, it } from "vitest";
import { lock, memoryStore, redisStore, ShutdownError, semaphore, ValidationError } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { processClock } from "../../../src/store/memory/clock.js";
import { createMemoryStore } from "../../../src/store/memory/index.js";
import { newRedis, uniquePrefix, watchDuplicates } from "../../support/redis.js";

describe("store.close()", () => {
  it("the Redis store ends the subscriber it opened, not your client; idempotent; later calls are refused", async () => {
    const client = newRedis();
    const duplicates = watchDuplicates(client);
    const store = redisStore(client);
    const key = `{${uniquePrefix()}:k}`;
    const stop = await store.watch({ storeKey: key, onGrant: () => {} });
    expect(duplicates).toHaveLength(1);
    const closing = store.close();
    expect(store.close()).toBe(closing);
    await closing;
    // No handle left open: the subscriber connection has ended when close() resolves.
    expect(duplicates.map((made) => made.status)).toEqual(["end"]);
    expect(client.status).toBe("ready");
    expect(await client.ping()).toBe("PONG");
    stop();
    await expect(
      store.semaphore.acquire({ storeKey: key, token: "t", limit: 1, weight: 1, leaseMs: 1000 }),
    ).rejects.toBeInstanceOf(ShutdownError);
    await expect(store.watch({ storeKey: key, onGrant: () => {} })).rejects.toBeInstanceOf(ShutdownError);
    await store.close();
  });

  it("the memory store clears every id's timer and refuses later acquires", async () => {
    const store = createMemoryStore({}, processClock);
    const key = "{close:k}";
    expect((await store.lock.acquire({ storeKey: key, token: "t", leaseMs: 60_000 })).acquired).toBe(true);
    expect((await store.semaphore.acquire({ storeKey: key, token: "t", limit: 1, weight: 1, leaseMs: 60_000 })).acquired).toBe(
      true,
    );
    await store.lock.release({ storeKey: key, token: "t" });
    await store.semaphore.release({ storeKey: key, token: "t" });
    // Released: each id keeps its typical hold a while, under a clean-up timer.
    expect(store.debugIds().locks).toEqual([[key, true]]);
    const closing = store.close();
    expect(store.close()).toBe(closing);
    await closing;
    expect(store.debugIds()).toEqual({ semaphores: [], locks: [] });
    await expect(store.lock.acquire({ storeKey: key, token: "t", leaseMs: 1000 })).rejects.toBeInstanceOf(ShutdownError);
  });

  it("declares its bound on the contract: the memory store 0 (it never hangs), the Redis store its timeoutMs", () => {
    expect(memoryStore().timeoutMs).toBe(0);
    expect(redisStore(newRedis(), { timeoutMs: 750 }).timeoutMs).toBe(750);
  });
});

describe("a store of the old positional contract", () => {
  const positional = {
    kind: "mine",
    semaphoreAcquire: async () => ({ acquired: true, retryAfterMs: 0, fence: 1 }),
    lockAcquire: async () => ({ acquired: true, retryAfterMs: 0, fence: 1 }),
    semaphoreRelease: async () => true,
  };

  it("is refused when the semaphore is made, with what changed and where it is documented", () => {
    let refusal: unknown;
    try {
      semaphore({ client: positional as never, limit: 1 });
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(ValidationError);
    expect((refusal as ValidationError).message).toMatch(/old positional contract/);
    expect((refusal as ValidationError).message).toMatch(/semaphore\.acquire\(\{ storeKey, token, limit, weight, leaseMs \}\)/);
    expect((refusal as ValidationError).message).toMatch(/docs\/clients\.md/);
  });

  it("is refused in the one-argument form too", () => {
    expect(() => semaphore(positional as never, { limit: 1 })).toThrow(ValidationError);
  });
});

// Issue #13: a store is told apart by its two `acquire` calls alone (src/store/contract/shape.ts),
// so one missing the rest of the contract was taken, and failed only later, after a slot was taken.
// A wrapper without `semaphore.release` admitted, then could never give the permit back (each
// release a StoreUnavailableError: the permit held for its whole lease). One without `watch` (as a
// spread of redisStore() was, its watch on the prototype: see test/shutdown/store-close.test.ts) left waiters
// deaf to grants: a 1 s wait timed out with a permit freed for it at 50 ms. A store missing a call of the contract is now refused when the semaphore or
// lock is made, with a ValidationError that names the calls.
function refusal(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("a store missing calls of the contract is refused at factory time", () => {
  it("a wrapper without semaphore.release", () => {
    const inner = memoryStore();
    const { release: _dropped, ...rest } = inner.semaphore;
    const wrapper = { kind: "partial", semaphore: rest, lock: inner.lock, watch: inner.watch } as unknown as Store;
    const error = refusal(() => semaphore({ client: wrapper, limit: 1 }));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).option).toBe("client");
    expect((error as Error).message).toContain("semaphore.release");
  });

  it("a wrapper without watch", () => {
    const inner = redisStore(newRedis());
    const wrapper = { kind: "no-watch", semaphore: inner.semaphore, lock: inner.lock } as unknown as Store;
    const error = refusal(() => lock({ client: wrapper }));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toContain("watch");
  });

  it("complete stores and wrappers are still taken", () => {
    const inner = memoryStore();
    expect(() => semaphore({ client: { ...inner, kind: "spread" }, limit: 1 })).not.toThrow();
    expect(() => semaphore({ client: { ...redisStore(newRedis()), kind: "spread" }, limit: 1 })).not.toThrow();
    expect(() => lock({ client: Object.create(redisStore(newRedis())) as Store })).not.toThrow();
  });
});
