// perf-memory: the embedded store keeps a semaphore's holders and waiters in slots, not in Maps by
// token (src/store/memory/slots.ts), and the engine hands a lease's record back on release and extend
// (`AcquireReply.record`, asked for with `recorded`). The record only saves a lookup: the token still decides. A record passed with
// another token, a record whose lease lapsed and whose slot another holder took, and lookups by token
// past the point where an index replaces the scan must all answer exactly as by token alone.
import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/index.js";
import type { AcquireReply } from "../../src/store/contract/types.js";
import type { Store } from "../../src/store/index.js";

const key = "{held:k}";
const local = (): Store => memoryStore();
const holders = async (store: Store): Promise<number> => (await store.semaphore.stats({ storeKey: key })).holders;
/** The embedded store answers these calls at once: each is its answer, not a promise. */
const take = (store: Store, token: string, limit = 4, leaseMs = 30_000) =>
  store.semaphore.acquire({ storeKey: key, token, limit, weight: 1, leaseMs, recorded: true }) as AcquireReply;
const release = (store: Store, token: string, record: object | undefined) =>
  store.semaphore.release({ storeKey: key, token, record });
const extend = (store: Store, token: string, leaseMs: number, record: object | undefined) =>
  store.semaphore.extend({ storeKey: key, token, leaseMs, record });

describe("the embedded store's records of its own process's leases", () => {
  it("a record passed with another token is ignored: that token's own lease is released", async () => {
    const store = local();
    const a = take(store, "a");
    const b = take(store, "b");
    expect(a.record).toBeDefined();
    expect(release(store, "b", a.record)).toBe(true);
    expect((await store.semaphore.inspect({ storeKey: key })).holders.map((h) => h.token)).toEqual(["a"]);
    // b's record is stale now: neither it nor a second release frees anything.
    expect(release(store, "b", b.record)).toBe(false);
    expect(release(store, "c", a.record)).toBe(false);
    expect(extend(store, "b", 1000, a.record)).toBe(false);
    expect(await holders(store)).toBe(1);
    await store.close?.();
  });

  it("a stale record whose slot another holder took does not release that holder", async () => {
    const store = local();
    const a = take(store, "a", 1, 20);
    await new Promise((resolve) => setTimeout(resolve, 40));
    // a lapsed; b prunes it and takes slot 0, the one a's record names.
    const b = take(store, "b", 1);
    expect(b.acquired).toBe(true);
    expect(release(store, "a", a.record)).toBe(false);
    expect(extend(store, "a", 1000, a.record)).toBe(false);
    expect(await holders(store)).toBe(1);
    expect(release(store, "b", b.record)).toBe(true);
    await store.close?.();
  });

  it("the Store contract's reply carries no record", async () => {
    const store = local();
    const reply = await store.semaphore.acquire({ storeKey: key, token: "a", limit: 1, weight: 1, leaseMs: 1000 });
    expect(reply).toEqual({ acquired: true, retryAfterMs: 0, fence: expect.any(Number) });
    await store.close?.();
  });

  it("past the scan, the index built by a lookup by token stays in step with releases by record", async () => {
    const store = local();
    const held = new Map<string, object | undefined>();
    for (let i = 0; i < 100; i++) held.set(`t${i}`, take(store, `t${i}`, 100).record);
    // A lookup by token alone (the Store contract) among 100: the index is built here.
    expect(await store.semaphore.release({ storeKey: key, token: "t50", weight: 1 })).toBe(true);
    // Releases by record move the last holder into the freed slot: every token must stay findable.
    for (let i = 0; i < 100; i += 3) if (i !== 50) release(store, `t${i}`, held.get(`t${i}`));
    for (let i = 0; i < 100; i++) {
      const expected = i !== 50 && i % 3 !== 0;
      expect(await store.semaphore.extend({ storeKey: key, token: `t${i}`, leaseMs: 30_000, weight: 1 }), `t${i}`).toBe(expected);
    }
    expect(await holders(store)).toBe(65);
    // A re-sent acquire finds its own lease by token: refreshed, not counted twice.
    expect(take(store, "t1", 100).acquired).toBe(true);
    expect(await holders(store)).toBe(65);
    await store.close?.();
  });

  it("waiters past the scan leave by token, and the rest are granted in order", async () => {
    const store = local();
    const h = take(store, "h", 1);
    const told: string[] = [];
    for (let i = 0; i < 40; i++) {
      const token = `w${i}`;
      const join = {
        leaseMs: 30_000,
        until: performance.now() + 60_000,
        maxQueue: 0,
        onGrant: () => told.push(token),
        onClose: () => {},
      };
      const reply = store.semaphore.acquire({
        storeKey: key,
        token,
        limit: 1,
        weight: 1,
        leaseMs: 30_000,
        queue: { waiterLeaseMs: 1, maxQueue: 0, waiter: join },
      }) as AcquireReply;
      expect(reply.queued).toBe(true);
    }
    for (let i = 0; i < 40; i += 2) store.semaphore.leave({ storeKey: key, token: `w${i}` });
    expect((await store.semaphore.stats({ storeKey: key })).waiting).toBe(20);
    expect(release(store, "h", h.record)).toBe(true);
    expect(told).toEqual(["w1"]);
    await store.close?.();
  });
});
