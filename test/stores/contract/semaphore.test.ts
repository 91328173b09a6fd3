import { describe, expect, it } from "vitest";
import { lock, type SemaphoreLease, SemaphoreNotAcquiredError, semaphore, ValidationError } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("semaphore on the $name store", ({ make }) => {
  const setup = (options: Record<string, unknown> = {}) => {
    const store = make();
    const slots = semaphore({ client: store, limit: 20, prefix: uniquePrefix(), ...options } as never);
    return { store, slots };
  };

  it("admits 20 of 25 concurrent runs; the other 5 reject with the key and limit", async () => {
    const { slots } = setup();
    const release = gate();
    let inside = 0;
    let maxInside = 0;
    let refused = 0;
    const runs = Array.from({ length: 25 }, () =>
      slots
        .run("openai", async () => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          await release.opened;
          inside--;
          return "done";
        })
        .catch((error: unknown) => {
          refused++;
          return error;
        }),
    );
    // Refused calls fail fast, while the admitted ones are still inside.
    await eventually(() => inside === 20 && refused === 5);
    release.open();
    const outcomes = await Promise.all(runs);
    expect(outcomes.filter((outcome) => outcome === "done")).toHaveLength(20);
    for (const error of outcomes.filter((outcome) => outcome !== "done") as SemaphoreNotAcquiredError[]) {
      expect(error).toBeInstanceOf(SemaphoreNotAcquiredError);
      expect(error.key).toBe("openai");
      expect(error.limit).toBe(20);
      expect(error.code).toBe("ERR_SEMAPHORE_NOT_ACQUIRED");
    }
    expect(maxInside).toBe(20);
    expect(await slots.count("openai")).toBe(0);
  });

  it("acquire resolves null when full instead of throwing", async () => {
    const { slots } = setup({ limit: 2 });
    const a = await slots.acquire("k");
    const b = await slots.acquire("k");
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(await slots.acquire("k")).toBeNull();
    expect(await a?.release()).toBe(true);
    const c = await slots.acquire("k");
    expect(c).not.toBeNull();
    await b?.release();
    await c?.release();
    expect(await slots.count("k")).toBe(0);
  });

  it("retries turn fail-fast into a bounded spin", async () => {
    const { slots } = setup({ limit: 1 });
    const held = await slots.acquire("k");
    expect(await slots.acquire("k", { retries: 2, retryDelayMs: 5 })).toBeNull();
    const waiting = slots.acquire("k", { retries: 200, retryDelayMs: 5 });
    setTimeout(() => void held?.release(), 50);
    const lease = await waiting;
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it("a signal cancels a spinning acquire with its own reason, and a late permit is given back", async () => {
    const { slots } = setup({ limit: 1 });
    const held = await slots.acquire("k");
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const spinning = slots.acquire("k", { retries: 1_000, retryDelayMs: 5, signal: controller.signal });
    setTimeout(() => controller.abort(reason), 30);
    await expect(spinning).rejects.toBe(reason);
    await expect(slots.run("k", async () => 1, { signal: controller.signal })).rejects.toBe(reason);
    await held?.release();
    expect(await slots.count("k")).toBe(0);
    await expect(slots.acquire("k", { signal: "stop" as never })).rejects.toMatchObject({ option: "signal" });
  });

  it("count ignores lapsed leases, and a crashed holder is reclaimed after its lease, not before", async () => {
    const { slots } = setup({ limit: 1 });
    const sentAt = performance.now();
    const crashed = await slots.acquire("k", { leaseMs: 400 });
    expect(crashed).not.toBeNull();
    expect(await slots.count("k")).toBe(1);
    // Nobody releases: the slot stays taken until the lease lapses...
    expect(await slots.acquire("k")).toBeNull();
    let next: SemaphoreLease | null = null;
    await eventually(async () => {
      next = await slots.acquire("k", { leaseMs: 10_000 });
      return next !== null;
    });
    // ...and is reclaimed only once a whole lease has passed since the crashed acquire was sent.
    // The store's clock counts whole milliseconds: allow that one millisecond of grain.
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(399);
    expect(await slots.count("k")).toBe(1);
    expect(await crashed?.release()).toBe(false);
    expect(await slots.count("k")).toBe(1);
    await (next as SemaphoreLease | null)?.release();
    expect(await slots.count("k")).toBe(0);
  });

  it("count does not count a lapsed holder that no acquire has pruned yet", async () => {
    const { slots } = setup({ limit: 3 });
    await slots.acquire("k", { leaseMs: 150 });
    const live = await slots.acquire("k", { leaseMs: 10_000 });
    expect(await slots.count("k")).toBe(2);
    await eventually(async () => (await slots.count("k")) === 1);
    await live?.release();
  });

  it("release and extend resolve true only while the lease is ours; a second release frees nothing", async () => {
    const { slots } = setup({ limit: 2 });
    const a = await slots.acquire("k");
    const b = await slots.acquire("k");
    expect(await a?.extend()).toBe(true);
    expect(await a?.extend(5_000)).toBe(true);
    expect(await a?.release()).toBe(true);
    expect(await a?.release()).toBe(false);
    expect(await a?.extend()).toBe(false);
    expect(await slots.count("k")).toBe(1);
    expect(await b?.release()).toBe(true);
    expect(await slots.count("k")).toBe(0);
  });

  it("a lease cannot be released or extended by another token", async () => {
    const { store, slots } = setup({ limit: 1 });
    const prefix = uniquePrefix();
    const own = semaphore({ client: store, limit: 1, prefix });
    const lease = await own.acquire("k");
    const key = storeKey(prefix, "semaphore", "k");
    expect(await store.semaphore.release({ storeKey: key, token: "someone-else" })).toBe(false);
    expect(await store.semaphore.extend({ storeKey: key, token: "someone-else", leaseMs: 10_000 })).toBe(false);
    expect(await own.count("k")).toBe(1);
    expect(await lease?.release()).toBe(true);
    void slots;
  });

  it("a handle is not renewed in the background: its signal aborts when its end passes, and extend then answers false", async () => {
    const { slots } = setup({ limit: 1 });
    const lease = await slots.acquire("k", { leaseMs: 150 });
    expect(lease?.signal.aborted).toBe(false);
    await eventually(async () => (await slots.count("k")) === 0);
    // Nobody renewed it: lapsed in the store, and its holder told by its own clock, without a call.
    await eventually(() => lease?.signal.aborted === true);
    expect(lease?.signal.reason).toMatchObject({ name: "SemaphoreLeaseLostError", key: "k", limit: 1 });
    expect(await lease?.extend()).toBe(false);
  });

  it("release resolves false once the lease lapsed, even though nobody took the slot", async () => {
    const { slots } = setup({ limit: 1 });
    const lease = await slots.acquire("k", { leaseMs: 100 });
    await eventually(async () => (await slots.count("k")) === 0);
    expect(await lease?.release()).toBe(false);
    expect(lease?.signal.aborted).toBe(true);
  });

  it("weighted permits are taken atomically, and a weight above the limit is refused before any slot", async () => {
    const { slots } = setup({ limit: 5 });
    const heavy = await slots.acquire("k", { weight: 3 });
    expect(heavy?.weight).toBe(3);
    expect(await slots.acquire("k", { weight: 3 })).toBeNull();
    const two = await slots.acquire("k", { weight: 2 });
    expect(two).not.toBeNull();
    expect(await slots.acquire("k")).toBeNull();
    expect(await slots.count("k")).toBe(2);
    await heavy?.release();
    const three = await slots.acquire("k", { weight: 3 });
    expect(three).not.toBeNull();
    await expect(slots.acquire("k", { weight: 6 })).rejects.toMatchObject({ name: "ValidationError", option: "weight" });
    await expect(slots.run("k", async () => 1, { weight: 0 })).rejects.toBeInstanceOf(ValidationError);
    await two?.release();
    await three?.release();
    expect(await slots.count("k")).toBe(0);
  });

  it("weighted holders that lapse give all their permits back", async () => {
    const { slots } = setup({ limit: 4 });
    await slots.acquire("k", { weight: 4, leaseMs: 150 });
    expect(await slots.acquire("k")).toBeNull();
    let lease: SemaphoreLease | null = null;
    await eventually(async () => {
      lease = await slots.acquire("k", { weight: 4 });
      return lease !== null;
    });
    await (lease as SemaphoreLease | null)?.release();
  });

  it("the limit travels with each call: per-id limits, and lowering one never revokes held leases", async () => {
    const store = make();
    const slots = semaphore({ client: store, prefix: uniquePrefix(), limit: (id: string) => (id === "big" ? 3 : 1) });
    const big = [await slots.acquire("big"), await slots.acquire("big"), await slots.acquire("big")];
    expect(big.every((lease) => lease !== null)).toBe(true);
    expect(big[0]?.limit).toBe(3);
    expect(await slots.acquire("big")).toBeNull();
    const small = await slots.acquire("small");
    expect(small?.limit).toBe(1);
    expect(await slots.acquire("small")).toBeNull();
    // Lower the limit of "big" to 1 for the next call: the three holders keep their permits.
    expect(await slots.acquire("big", { limit: 1 })).toBeNull();
    expect(await slots.count("big")).toBe(3);
    expect(await big[0]?.extend()).toBe(true);
    for (const lease of big) expect(await lease?.release()).toBe(true);
    await small?.release();
  });

  it("acquire is idempotent per token: a re-sent acquire does not take a second permit", async () => {
    const store = make();
    const key = `{${uniquePrefix()}:k}`;
    expect((await store.semaphore.acquire({ storeKey: key, token: "tok", limit: 2, weight: 1, leaseMs: 10_000 })).acquired).toBe(
      true,
    );
    expect((await store.semaphore.acquire({ storeKey: key, token: "tok", limit: 2, weight: 1, leaseMs: 10_000 })).acquired).toBe(
      true,
    );
    expect(await store.semaphore.count({ storeKey: key })).toBe(1);
    expect(
      (await store.semaphore.acquire({ storeKey: key, token: "other", limit: 2, weight: 1, leaseMs: 10_000 })).acquired,
    ).toBe(true);
    expect(
      (await store.semaphore.acquire({ storeKey: key, token: "third", limit: 2, weight: 1, leaseMs: 10_000 })).acquired,
    ).toBe(false);
    expect(await store.semaphore.release({ storeKey: key, token: "tok" })).toBe(true);
    expect(await store.semaphore.release({ storeKey: key, token: "other" })).toBe(true);
    expect(await store.semaphore.count({ storeKey: key })).toBe(0);
  });

  it("a refused acquire says how long until the nearest lease ends", async () => {
    const store = make();
    const key = `{${uniquePrefix()}:k}`;
    await store.semaphore.acquire({ storeKey: key, token: "a", limit: 1, weight: 1, leaseMs: 5_000 });
    const reply = await store.semaphore.acquire({ storeKey: key, token: "b", limit: 1, weight: 1, leaseMs: 5_000 });
    expect(reply.acquired).toBe(false);
    expect(reply.retryAfterMs).toBeGreaterThan(0);
    expect(reply.retryAfterMs).toBeLessThanOrEqual(5_000);
    await store.semaphore.release({ storeKey: key, token: "a" });
  });

  it("every (prefix, id) pair has keys of its own: a prefix with a colon is refused", async () => {
    const store = make();
    const base = uniquePrefix();
    // Both pairs would be the key `{<base>:v2:x}`: (base, "v2:x") and (`${base}:v2`, "x").
    expect(() => semaphore({ client: store, limit: 1, prefix: `${base}:v2` })).toThrow(ValidationError);
    expect(() => lock({ client: store, prefix: `${base}:v2` })).toThrow(/must not contain ":"/);
    const outer = semaphore({ client: store, limit: 1, prefix: base });
    // The spelling the error suggests instead.
    const inner = semaphore({ client: store, limit: 1, prefix: `${base}-v2` });
    const held = await outer.acquire("v2:x");
    expect(held).not.toBeNull();
    const other = await inner.acquire("x");
    expect(other).not.toBeNull();
    expect(await outer.count("v2:x")).toBe(1);
    expect(await inner.count("x")).toBe(1);
    await held?.release();
    await other?.release();
  });

  it("tokens start with 128 random bits, unique per lease", async () => {
    const { slots } = setup({ limit: 50 });
    const leases = await Promise.all(Array.from({ length: 50 }, () => slots.acquire("k")));
    const tokens = new Set(leases.map((lease) => lease?.token));
    expect(tokens.size).toBe(50);
    expect(new Set(leases.map((lease) => lease?.token.split(".")[0])).size).toBe(50);
    // '<random>.<acquired at>.<owner>.<limit>' (src/lease/owner.ts)
    for (const token of tokens) {
      const [random, ...rest] = (token ?? "").split(".");
      expect(Buffer.from(random ?? "", "base64url")).toHaveLength(16);
      expect(rest).toHaveLength(3);
    }
    await Promise.all(leases.map((lease) => lease?.release()));
  });
});
