import { hostname } from "node:os";
import { describe, expect, it } from "vitest";
import { lock, MAX_OWNER_LENGTH, semaphore, ValidationError } from "../../../src/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

const processOwner = `${hostname()}:${process.pid}`;
// The acquire time is read in whole ms off a clock synchronised with Date.now() once a second: 1 ms of grain.

describe.each(storesUnderTest)("holders on the $name store", ({ make }) => {
  it("a semaphore lists each live lease with its owner, acquire time, end, weight, tenant and limit, oldest first", async () => {
    const slots = semaphore({ client: make(), limit: 5, prefix: uniquePrefix(), tenantLimit: 3 });
    expect(await slots.holders("k")).toEqual([]);
    const before = Date.now();
    const first = await slots.acquire("k", { leaseMs: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await slots.acquire("k", { owner: "req-7f3a", weight: 2, tenant: "acme", leaseMs: 20_000 });
    const after = Date.now();
    const holders = await slots.holders("k");
    expect(holders).toHaveLength(2);
    const [a, b] = holders;
    expect(a).toMatchObject({ token: first?.token, owner: processOwner, weight: 1, limit: 5 });
    expect(a?.tenant).toBeUndefined();
    expect(b).toMatchObject({ token: second?.token, owner: "req-7f3a", weight: 2, tenant: "acme", limit: 5 });
    // The acquire time comes from a monotonic clock anchored at the process's start, which drifts from
    // Date.now() by a few ms over a long run (seen: 1 ms past `after` in a full suite): a margin each side.
    for (const h of holders) {
      expect(h.acquiredAt).toBeGreaterThanOrEqual(before - 10);
      expect(h.acquiredAt).toBeLessThanOrEqual(after + 10);
    }
    // The store's figure, read against this process's clock: generous margins, ordering only.
    expect(a?.expiresAt).toBeGreaterThan(after + 20_000);
    expect(a?.expiresAt).toBeLessThanOrEqual(Date.now() + 30_000);
    expect(b?.expiresAt).toBeGreaterThan(after + 10_000);
    expect(b?.expiresAt).toBeLessThanOrEqual(Date.now() + 20_000);
    await first?.release();
    expect((await slots.holders("k")).map((h) => h.token)).toEqual([second?.token]);
    await second?.release();
    expect(await slots.holders("k")).toEqual([]);
  });

  it("the factory's owner is every call's default, and a call's own limit is the one recorded", async () => {
    const slots = semaphore({
      client: make(),
      limit: (id) => (id === "big" ? 9 : 2),
      prefix: uniquePrefix(),
      owner: "billing-job",
    });
    const big = await slots.acquire("big");
    const small = await slots.acquire("small", { limit: 4 });
    expect(await slots.holders("big")).toMatchObject([{ owner: "billing-job", limit: 9 }]);
    expect(await slots.holders("small")).toMatchObject([{ owner: "billing-job", limit: 4 }]);
    await big?.release();
    await small?.release();
  });

  it("a waiter granted a permit is listed under its own owner; lapsed leases are not", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix() });
    const lapsing = await slots.acquire("k", { leaseMs: 200, owner: "stalled" });
    const waiting = slots.acquire("k", { waitMs: 10_000, owner: "patient" });
    const granted = await waiting;
    expect(granted).not.toBeNull();
    expect(await slots.holders("k")).toMatchObject([{ owner: "patient", token: granted?.token }]);
    expect(lapsing?.token).not.toBe(granted?.token);
    await granted?.release();
    await eventually(async () => (await slots.holders("k")).length === 0);
  });

  it("a lock names its holder, or null when free", async () => {
    const locks = lock({ client: make(), prefix: uniquePrefix(), owner: "cron" });
    expect(await locks.holder("order:42")).toBeNull();
    const before = Date.now();
    const lease = await locks.acquire("order:42", { ttlMs: 10_000 });
    const held = await locks.holder("order:42");
    expect(held).toMatchObject({ token: lease?.token, owner: "cron", weight: 1 });
    expect(held?.limit).toBeUndefined();
    expect(held?.tenant).toBeUndefined();
    expect(held?.acquiredAt).toBeGreaterThanOrEqual(before - 1);
    expect(held?.expiresAt).toBeGreaterThan(Date.now() + 5_000);
    await lease?.release();
    expect(await locks.holder("order:42")).toBeNull();
    await locks.run(
      "order:42",
      async () => {
        expect(await locks.holder("order:42")).toMatchObject({ owner: "req-1" });
      },
      { owner: "req-1" },
    );
  });

  it("no owner can break the token formats the scripts parse: spaces, '~', '@', '.', non-ASCII", async () => {
    const client = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client, limit: 7, prefix });
    const owners = ["~", "~2", "a b", "x@y", "a.b.c", "ü 🔒 ~f12 @t"];
    const leases = [];
    for (const owner of owners) leases.push(await slots.acquire("k", { owner, weight: owner === "~2" ? 2 : 1 }));
    expect(leases.every((lease) => lease !== null)).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 7, holders: 6 });
    expect(await slots.count("k")).toBe(6);
    expect((await slots.holders("k")).map((h) => h.owner).sort()).toEqual([...owners].sort());
    for (const lease of leases) expect(await lease?.release()).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0 });

    const locks = lock({ client, prefix });
    for (const owner of owners) {
      const lease = await locks.acquire("l", { owner });
      expect(await locks.holder("l")).toMatchObject({ owner });
      expect(await lease?.extend()).toBe(true);
      expect(await lease?.release()).toBe(true);
      expect(await locks.holder("l")).toBeNull();
    }
  });

  it("refuses an owner that is empty, too long, not a string or has control characters, before any slot is taken", async () => {
    const client = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client, limit: 2, prefix });
    const locks = lock({ client, prefix });
    const bad: unknown[] = ["", "x".repeat(MAX_OWNER_LENGTH + 1), 42, "line\nbreak", "esc\u001b[2J"];
    for (const owner of bad) {
      await expect(slots.acquire("k", { owner } as never)).rejects.toThrow(ValidationError);
      await expect(slots.run("k", () => 1, { owner } as never)).rejects.toThrow(/`owner` must be a non-empty string/);
      await expect(locks.acquire("k", { owner } as never)).rejects.toThrow(ValidationError);
      expect(() => semaphore({ client, limit: 1, owner } as never)).toThrow(ValidationError);
      expect(() => lock({ client, owner } as never)).toThrow(ValidationError);
    }
    expect(await slots.count("k")).toBe(0);
    expect(await locks.holder("k")).toBeNull();
    expect((await slots.acquire("k", { owner: "x".repeat(MAX_OWNER_LENGTH) }))?.token).toBeTypeOf("string");
  });
});
