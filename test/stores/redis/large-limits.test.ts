// A limit of 1e14 or more (Number.MAX_SAFE_INTEGER, a natural "unlimited" for some tenants from a limit
// function) is a valid limit (options/validate.ts: any safe integer >= 1). lua/lib/queue.lua stores a waiter's weight and
// limit as `weight .. ' ' .. limit`, which Lua 5.1 formats with "%.14g" ("1 9.007199254741e+15"), and
// queue_info() parses it with '^(%d+) (%d+)$': no match, nil weight, and grant() fails with "attempt to perform
// arithmetic on local 'w' (a nil value)" in every script that reaches that waiter: releases, acquires, refreshes.
// The writes made before the error stay (a script is not rolled back), so the release has already removed its
// holder and granted the waiters ahead, without announcing them or setting expiries. The memory store is fine.
import { describe, expect, it } from "vitest";
import { semaphore } from "../../../src/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("a waiter with a very large limit on the $name store", ({ make }) => {
  it("does not break releases and grants of the id", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix() });
    const holder = await slots.acquire("k");
    expect(holder).not.toBeNull();
    const first = slots.acquire("k", { waitMs: 8_000 });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    // A caller whose limit says "no limit for me" must still queue behind the first (a newcomer never jumps).
    const unlimited = slots.acquire("k", { waitMs: 8_000, limit: Number.MAX_SAFE_INTEGER });
    await eventually(async () => (await slots.stats("k")).waiting === 2);

    // memory: true. redis: StoreUnavailableError (the release script fails in grant(), after removing the holder).
    const released = await holder?.release().catch((error: unknown) => (error as Error).message);
    expect(released).toBe(true);
    const a = await first;
    expect(a).not.toBeNull();
    expect(await a?.release()).toBe(true);
    const b = await unlimited;
    expect(b).not.toBeNull();
    await b?.release();
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0, waiting: 0 });
  });

  it("does not turn fail-fast refusals on the id into store failures once that waiter is at the head", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix() });
    const holder = await slots.acquire("k");
    const controller = new AbortController();
    const first = slots.acquire("k", { waitMs: 8_000, signal: controller.signal }).catch(() => "left");
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    const unlimited = slots.acquire("k", { waitMs: 8_000, limit: Number.MAX_SAFE_INTEGER });
    await eventually(async () => (await slots.stats("k")).waiting === 2);
    controller.abort();
    expect(await first).toBe("left");
    // Every fail-fast caller (limit 1) meets the queue: refused, an ordinary answer (memory: null; redis: the
    // acquire script fails in grant() and the caller gets StoreUnavailableError; an adapter answers 503
    // store-unavailable, or lets it through with onStoreError: "fail-open").
    const outcome = await slots.acquire("k").then(
      (lease) => lease,
      (error: unknown) => (error as Error).name,
    );
    expect(outcome).toBeNull();
    await holder?.release().catch(() => {});
    const lease = await unlimited;
    await lease?.release();
  });
});
