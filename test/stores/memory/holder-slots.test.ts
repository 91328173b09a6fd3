// The embedded store keeps a semaphore's holders and waiters in slots, not in Maps by
// token (src/store/memory/slots.ts), and the engine hands a lease's record back on release and extend
// (`AcquireReply.record`, asked for with `recorded`). The record only saves a lookup: the token still
// decides. A record passed with another token, a record whose lease lapsed and whose slot another
// holder took, and lookups by token past the point where an index replaces the scan must all answer
// exactly as by token alone.
import { describe, expect, it } from "vitest";
import { type Lease, memoryStore, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { AcquireReply } from "../../../src/store/contract/types.js";
import type { Store } from "../../../src/store/index.js";
import { processClock } from "../../../src/store/memory/clock.js";
import { createMemoryStore } from "../../../src/store/memory/index.js";

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

// The embedded store's holders in slots (src/store/memory/slots.ts). The engine hands back
// its record on release and extend; lookups by token alone (the Store contract, a re-sent acquire)
// scan up to 32 holders and past that build an index, kept while holders come and go. Mixed on one
// id: leases of the engine, calls by token through the contract, the index built and then holders
// removed (by record and by token), lapsed and added. A stale, released or foreign token is never
// accepted, a re-sent acquire never counts twice, and the counts always match the live leases.

const LIMIT = 60;

describe("the embedded store's holder slots, past the index", () => {
  it("engine leases and contract calls by token on one id agree, through the index's life", async () => {
    let now = 1_000_000;
    const store = createMemoryStore({}, { ...processClock, now: () => now });
    const slots = semaphore(store, { limit: LIMIT, prefix: "p" });
    const key = storeKey("p", "semaphore", "k");
    const contract = (token: string) => ({ storeKey: key, token, limit: LIMIT, weight: 1, leaseMs: 10_000 });
    const leases: Lease[] = [];
    for (let i = 0; i < 36; i++) leases.push((await slots.acquire("k", { leaseMs: 60_000 })) as Lease);
    const byToken: string[] = [];
    for (let i = 0; i < 10; i++) {
      const token = `c${i}`;
      expect((await store.semaphore.acquire(contract(token))).acquired).toBe(true);
      byToken.push(token);
    }
    // A re-sent acquire by token (46 holders: the index is built here) counts nothing twice.
    expect((await store.semaphore.acquire(contract("c3"))).acquired).toBe(true);
    expect((await store.semaphore.stats({ storeKey: key })).used).toBe(46);
    // Engine leases released by record, some by token through the contract (the index must follow both).
    for (const lease of leases.splice(0, 12)) expect(await lease.release()).toBe(true);
    for (const lease of leases.splice(0, 4)) {
      expect(await store.semaphore.release({ storeKey: key, token: lease.token, weight: 1 })).toBe(true);
      // Its handle, after: the record is gone, the token holds nothing.
      expect(await lease.release()).toBe(false);
      expect(await lease.extend(1_000)).toBe(false);
    }
    for (const token of byToken.splice(0, 5))
      expect(await store.semaphore.release({ storeKey: key, token, weight: 1 })).toBe(true);
    // Released tokens, a foreign token and a token of another id are refused.
    for (const token of ["c0", "c4", "nobody"]) {
      expect(await store.semaphore.release({ storeKey: key, token, weight: 1 })).toBe(false);
      expect(await store.semaphore.extend({ storeKey: key, token, leaseMs: 1_000, weight: 1 })).toBe(false);
    }
    const other = (await slots.acquire("other")) as Lease;
    expect(await store.semaphore.release({ storeKey: key, token: other.token, weight: 1 })).toBe(false);
    expect(
      await store.semaphore.release({
        storeKey: storeKey("p", "semaphore", "other"),
        token: leases[0]?.token as string,
        weight: 1,
      }),
    ).toBe(false);
    const live = 46 - 12 - 4 - 5;
    expect((await store.semaphore.stats({ storeKey: key })).used).toBe(live);
    // The contract's leases (10 s) lapse; the engine's (60 s) stay; new ones come by token and by engine.
    now += 11_000;
    for (let i = 0; i < 8; i++) leases.push((await slots.acquire("k", { leaseMs: 60_000 })) as Lease);
    for (const token of byToken) expect(await store.semaphore.release({ storeKey: key, token, weight: 1 })).toBe(false);
    expect((await store.semaphore.acquire(contract("c9"))).acquired).toBe(true);
    const inspection = await store.semaphore.inspect({ storeKey: key });
    const tokens = new Set(inspection.holders.map((holder) => holder.token));
    expect(tokens).toEqual(new Set([...leases.map((lease) => lease.token), "c9"]));
    expect((await store.semaphore.stats({ storeKey: key })).used).toBe(leases.length + 1);
    // Every live lease is found, whichever way it is asked for.
    for (const lease of leases.slice(0, 10)) {
      expect(await store.semaphore.extend({ storeKey: key, token: lease.token, leaseMs: 60_000, weight: 1 })).toBe(true);
      expect(await lease.release()).toBe(true);
    }
    for (const lease of leases.slice(10)) {
      expect(await store.semaphore.release({ storeKey: key, token: lease.token, weight: 1 })).toBe(true);
      expect(await lease.release()).toBe(false);
    }
    expect(await store.semaphore.release({ storeKey: key, token: "c9", weight: 1 })).toBe(true);
    expect(await store.semaphore.stats({ storeKey: key })).toMatchObject({ used: 0, holders: 0 });
    await other.release();
  });
});
