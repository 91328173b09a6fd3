// review8: the embedded store's holders in slots (src/store/memory/slots.ts). The engine hands back
// its record on release and extend; lookups by token alone (the Store contract, a re-sent acquire)
// scan up to 32 holders and past that build an index, kept while holders come and go. Mixed on one
// id: leases of the engine, calls by token through the contract, the index built and then holders
// removed (by record and by token), lapsed and added. A stale, released or foreign token is never
// accepted, a re-sent acquire never counts twice, and the counts always match the live leases.
import { describe, expect, it } from "vitest";
import { type Lease, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { processClock } from "../../src/store/memory/clock.js";
import { createMemoryStore } from "../../src/store/memory/index.js";

const LIMIT = 60;

describe("review8: the embedded store's holder slots, past the index", () => {
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
