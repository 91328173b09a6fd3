// perf-memory: the embedded store keeps a semaphore's holders and waiters in slots, not in Maps by
// token (src/store/memory/slots.ts), and the engine hands a lease's record back on release and extend
// (`LocalReply.held`). The record only saves a lookup: the token still decides. A record passed with
// another token, a record whose lease lapsed and whose slot another holder took, and lookups by token
// past the point where an index replaces the scan must all answer exactly as by token alone.
import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/index.js";
import type { LocalStore } from "../../src/store/memory/local.js";

const key = "{held:k}";
const local = (): LocalStore => memoryStore() as unknown as LocalStore;
const holders = async (store: LocalStore): Promise<number> => (await store.semaphore.stats({ storeKey: key })).holders;
const take = (store: LocalStore, token: string, limit = 4, leaseMs = 30_000) =>
  store.takeNow("semaphore", key, token, limit, 1, leaseMs);

describe("the embedded store's records of its own process's leases", () => {
  it("a record passed with another token is ignored: that token's own lease is released", async () => {
    const store = local();
    const a = take(store, "a");
    const b = take(store, "b");
    expect(a.held).toBeDefined();
    expect(store.releaseNow("semaphore", key, "b", undefined, undefined, a.held)).toBe(true);
    expect((await store.semaphore.inspect({ storeKey: key })).holders.map((h) => h.token)).toEqual(["a"]);
    // b's record is stale now: neither it nor a second release frees anything.
    expect(store.releaseNow("semaphore", key, "b", undefined, undefined, b.held)).toBe(false);
    expect(store.releaseNow("semaphore", key, "c", undefined, undefined, a.held)).toBe(false);
    expect(store.extendNow("semaphore", key, "b", 1000, a.held)).toBe(false);
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
    expect(store.releaseNow("semaphore", key, "a", undefined, undefined, a.held)).toBe(false);
    expect(store.extendNow("semaphore", key, "a", 1000, a.held)).toBe(false);
    expect(await holders(store)).toBe(1);
    expect(store.releaseNow("semaphore", key, "b", undefined, undefined, b.held)).toBe(true);
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
    for (let i = 0; i < 100; i++) held.set(`t${i}`, take(store, `t${i}`, 100).held);
    // A lookup by token alone (the Store contract) among 100: the index is built here.
    expect(await store.semaphore.release({ storeKey: key, token: "t50", weight: 1 })).toBe(true);
    // Releases by record move the last holder into the freed slot: every token must stay findable.
    for (let i = 0; i < 100; i += 3)
      if (i !== 50) store.releaseNow("semaphore", key, `t${i}`, undefined, undefined, held.get(`t${i}`));
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
      expect(store.waitNow("semaphore", key, token, 1, 1, join).queued).toBe(true);
    }
    for (let i = 0; i < 40; i += 2) store.leaveNow("semaphore", key, `w${i}`);
    expect((await store.semaphore.stats({ storeKey: key })).waiting).toBe(20);
    expect(store.releaseNow("semaphore", key, "h", undefined, undefined, h.held)).toBe(true);
    expect(told).toEqual(["w1"]);
    await store.close?.();
  });
});
