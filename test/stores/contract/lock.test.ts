import { describe, expect, it } from "vitest";
import { type LockLease, LockNotAcquiredError, lock } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("lock on the $name store", ({ make }) => {
  const setup = (options: Record<string, unknown> = {}) => {
    const store = make();
    const prefix = uniquePrefix();
    return { store, prefix, locks: lock({ client: store, prefix, ...options }) };
  };

  it("six concurrent runs on one id: one runs, five reject with LockNotAcquiredError", async () => {
    const { locks } = setup();
    const release = gate();
    let inside = 0;
    let refused = 0;
    const runs = Array.from({ length: 6 }, () =>
      locks
        .run("order:42", async () => {
          inside++;
          await release.opened;
          return "ran";
        })
        .catch((error: unknown) => {
          refused++;
          return error;
        }),
    );
    await eventually(() => inside === 1 && refused === 5);
    release.open();
    const outcomes = await Promise.all(runs);
    expect(outcomes.filter((outcome) => outcome === "ran")).toHaveLength(1);
    for (const error of outcomes.filter((outcome) => outcome !== "ran") as LockNotAcquiredError[]) {
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      expect(error.key).toBe("order:42");
      expect(error.code).toBe("ERR_LOCK_NOT_ACQUIRED");
    }
    expect(await locks.acquire("order:42")).not.toBeNull();
  });

  it("with enough retries all six callers run, one at a time, never two at once", async () => {
    const { locks } = setup();
    let inside = 0;
    let maxInside = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 6 }, (_, n) =>
        locks.run(
          "order:42",
          async () => {
            inside++;
            maxInside = Math.max(maxInside, inside);
            order.push(n);
            await new Promise((resolve) => setTimeout(resolve, 20));
            inside--;
          },
          { retries: 500, retryDelayMs: 5 },
        ),
      ),
    );
    expect(order.sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(maxInside).toBe(1);
  });

  it("acquire resolves null while held; release and extend are true only for the holder", async () => {
    const { locks } = setup();
    const held = await locks.acquire("k");
    expect(held).not.toBeNull();
    expect(await locks.acquire("k")).toBeNull();
    expect(await held?.extend()).toBe(true);
    expect(await held?.release()).toBe(true);
    expect(await held?.release()).toBe(false);
    expect(await held?.extend()).toBe(false);
    const next = await locks.acquire("k");
    expect(next).not.toBeNull();
    await next?.release();
  });

  it("an expired holder never deletes or extends the lock its successor took", async () => {
    const { locks } = setup();
    const old = await locks.acquire("k", { ttlMs: 100 });
    let successor: LockLease | null = null;
    await eventually(async () => {
      successor = await locks.acquire("k", { ttlMs: 10_000 });
      return successor !== null;
    });
    expect(await old?.extend()).toBe(false);
    expect(old?.signal.aborted).toBe(true);
    expect(old?.signal.reason).toMatchObject({ name: "LockLeaseLostError", key: "k" });
    expect(await old?.release()).toBe(false);
    // The successor still holds it.
    expect(await locks.acquire("k")).toBeNull();
    expect(await (successor as LockLease | null)?.release()).toBe(true);
  });

  it("another token cannot release or extend the lock", async () => {
    const { store, prefix, locks } = setup();
    const held = await locks.acquire("k");
    const key = storeKey(prefix, "lock", "k");
    expect(await store.lock.release({ storeKey: key, token: "intruder" })).toBe(false);
    expect(await store.lock.extend({ storeKey: key, token: "intruder", leaseMs: 10_000 })).toBe(false);
    expect(await locks.acquire("k")).toBeNull();
    expect(await held?.release()).toBe(true);
  });

  it("acquire is idempotent per token, and a refusal says how long the lock stays held", async () => {
    const { store, prefix } = setup();
    const key = storeKey(prefix, "lock", "k");
    expect((await store.lock.acquire({ storeKey: key, token: "tok", leaseMs: 5_000 })).acquired).toBe(true);
    expect((await store.lock.acquire({ storeKey: key, token: "tok", leaseMs: 5_000 })).acquired).toBe(true);
    const refused = await store.lock.acquire({ storeKey: key, token: "other", leaseMs: 5_000 });
    expect(refused.acquired).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(5_000);
    expect(await store.lock.release({ storeKey: key, token: "tok" })).toBe(true);
    expect(await store.lock.release({ storeKey: key, token: "tok" })).toBe(false);
  });

  it("a crashed holder's lock is reclaimed after its ttl, not before", async () => {
    const { locks } = setup();
    const sentAt = performance.now();
    await locks.acquire("k", { ttlMs: 300 });
    expect(await locks.acquire("k")).toBeNull();
    let next: LockLease | null = null;
    await eventually(async () => {
      next = await locks.acquire("k");
      return next !== null;
    });
    // The store's clock counts whole milliseconds: allow that one millisecond of grain.
    expect(performance.now() - sentAt).toBeGreaterThanOrEqual(299);
    await (next as LockLease | null)?.release();
  });
});
