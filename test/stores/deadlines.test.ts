// The one timer per store that bounds every round trip (src/store/access/deadlines.ts): each call times out
// once its own deadline has passed, never one answered first, and an answer after the timeout is not
// heard. Ordering and counts only; the margins are wide (two shared cores).

import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { Deadlines } from "../../src/store/access/deadlines.js";
import type { Store } from "../../src/store/index.js";
import { newRedis } from "../support/redis.js";
import { type AnyCall, eventually, mapCalls } from "../support/stores.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("store deadlines", () => {
  it("times out the calls still out, in order, and not those answered", async () => {
    const deadlines = new Deadlines();
    const expired: string[] = [];
    const now = performance.now();
    const a = deadlines.add(now + 30, () => expired.push("a"));
    const b = deadlines.add(now + 30, () => expired.push("b"));
    const c = deadlines.add(now + 60, () => expired.push("c"));
    // b answers; then a second call of the same deadline as c.
    expect(deadlines.settle(b)).toBe(true);
    const d = deadlines.add(now + 60, () => expired.push("d"));
    expect(deadlines.settle(d)).toBe(true);
    await pause(400);
    expect(expired).toEqual(["a", "c"]);
    // Timed out first: their answers are not heard, and nothing is heard twice.
    expect(deadlines.settle(a)).toBe(false);
    expect(deadlines.settle(c)).toBe(false);
    expect(deadlines.settle(b)).toBe(false);
  });

  it("a call given less than the others (out of deadline order) times out on its own time", async () => {
    const deadlines = new Deadlines();
    const expired: string[] = [];
    const now = performance.now();
    const long = deadlines.add(now + 5_000, () => expired.push("long"));
    const short = deadlines.add(now + 20, () => expired.push("short"));
    const answered = deadlines.add(now + 20, () => expired.push("answered"));
    expect(deadlines.settle(answered)).toBe(true);
    await pause(400);
    expect(expired).toEqual(["short"]);
    expect(deadlines.settle(short)).toBe(false);
    expect(deadlines.settle(long)).toBe(true);
  });

  it("a call added after the others were answered gets its whole bound, from when it was added", async () => {
    const deadlines = new Deadlines();
    const expired: number[] = [];
    const first = deadlines.add(performance.now() + 100, () => expired.push(1));
    deadlines.settle(first);
    await pause(50);
    // The timer armed for the first call fires before this one is due, and must wait for it.
    const addedAt = performance.now();
    let expiredAt = 0;
    deadlines.add(addedAt + 300, () => {
      expiredAt = performance.now();
      expired.push(2);
    });
    await pause(1_000);
    expect(expired).toEqual([2]);
    expect(expiredAt - addedAt).toBeGreaterThanOrEqual(299);
  });

  it("thousands answered in order past one still out: only the one still out times out", async () => {
    const deadlines = new Deadlines();
    const expired: number[] = [];
    const at = performance.now() + 50;
    // More than the queue keeps before it cuts down its answered head.
    const answered = Array.from({ length: 3_000 }, (_, i) => deadlines.add(at, () => expired.push(i)));
    const last = deadlines.add(at + 1, () => expired.push(-1));
    for (const entry of answered) expect(deadlines.settle(entry)).toBe(true);
    await pause(500);
    expect(expired).toEqual([-1]);
    expect(deadlines.settle(last)).toBe(false);
    expect(deadlines.settle(answered[0] as never)).toBe(false);
  });
});

// A call added once every earlier call was answered must time out on its own deadline,
// even when it is given less than those earlier calls (a wait's last call, `spentMs`): the timer
// left armed for the earlier, later deadline must not be the one that bounds it.

describe("store deadlines: a stale timer", () => {
  it("a shorter call added after the queue emptied times out on its own time", async () => {
    const deadlines = new Deadlines();
    const first = deadlines.add(performance.now() + 3_000, () => {});
    expect(deadlines.settle(first)).toBe(true);
    const addedAt = performance.now();
    let expiredAt = 0;
    deadlines.add(addedAt + 50, () => {
      expiredAt = performance.now();
    });
    await pause(1_000);
    expect(expiredAt).toBeGreaterThan(0);
    expect(expiredAt - addedAt).toBeLessThan(900);
  });
});

// The one deadline timer per store (src/store/access/deadlines.ts) over a real Redis, through a
// custom store that answers its calls out of order, late, or never. Every call must time out on its
// own bound, a late answer must not be heard, and an acquire that timed out must have its permit given
// back when its late answer arrives.

/** A store over Redis whose n-th semaphore acquire is held (`delayMs`, or forever with -1). */
function held(plan: (n: number) => number, timeoutMs = 300): Store {
  const inner = redisStore(newRedis());
  let n = 0;
  const around = (name: string, real: AnyCall): AnyCall =>
    ((call: never) => {
      if (name !== "semaphore.acquire") return real(call);
      const delay = plan(++n);
      if (delay < 0) return new Promise(() => {});
      // Held on the way there: the acquire reaches Redis after the clean-up's leave.
      if (delay >= 10_000) return pause(delay - 10_000).then(() => real(call));
      const answer = Promise.resolve(real(call));
      return delay === 0 ? answer : answer.then((reply) => pause(delay).then(() => reply));
    }) as AnyCall;
  return { ...mapCalls(inner, around), timeoutMs };
}

const settled = (p: Promise<unknown>) =>
  p.then(
    (value) => ({ value, at: performance.now() }),
    (error: unknown) => ({ error, at: performance.now() }),
  );

describe("store deadlines over Redis", () => {
  it("a call that never answers times out while later ones answer", async () => {
    const slots = semaphore({ client: held((n) => (n === 1 ? -1 : 0)), limit: 5, leaseMs: 10_000 });
    const id = randomUUID();
    const start = performance.now();
    const first = settled(slots.acquire(id));
    const later = await Promise.all([slots.acquire(id), slots.acquire(id)]);
    expect(later.every((lease) => lease !== null)).toBe(true);
    const out = await first;
    expect((out as { error: unknown }).error).toBeInstanceOf(StoreUnavailableError);
    expect(out.at - start).toBeLessThan(1_500);
    for (const lease of later) await lease?.release();
    expect(await slots.count(id)).toBe(0);
  });

  it("an acquire answered after its bound is not heard, and its permit is given back", async () => {
    const slots = semaphore({ client: held((n) => (n === 1 ? 900 : n === 2 ? 100 : 0)), limit: 1, leaseMs: 30_000 });
    const id = randomUUID();
    const start = performance.now();
    const first = settled(slots.acquire(id));
    const second = settled(slots.acquire(id));
    const [a, b] = await Promise.all([first, second]);
    expect((a as { error: unknown }).error).toBeInstanceOf(StoreUnavailableError);
    expect(a.at - start).toBeLessThan(800);
    // The first took the only permit before the second asked: the second was refused.
    expect((b as { value: unknown }).value).toBeNull();
    // The late answer (acquired) arrives at ~900 ms: the permit must go back, not wait 30 s. Read
    // through a plain store on the same server (the held one's breaker is open after the timeout).
    const plain = semaphore({ client: redisStore(newRedis()), limit: 1, leaseMs: 30_000 });
    await eventually(async () => (await plain.count(id)) === 0, 5_000);
    const again = await plain.acquire(id);
    expect(again).not.toBeNull();
    await again?.release();
  });

  it("an acquire that reaches Redis after it timed out (and after its leave) has its permit given back", async () => {
    const slots = semaphore({ client: held((n) => (n === 1 ? 10_700 : 0)), limit: 1, leaseMs: 30_000 });
    const plain = semaphore({ client: redisStore(newRedis()), limit: 1, leaseMs: 30_000 });
    const id = randomUUID();
    await expect(slots.acquire(id)).rejects.toBeInstanceOf(StoreUnavailableError);
    await pause(600);
    await eventually(async () => (await plain.count(id)) === 0, 5_000);
    const again = await plain.acquire(id);
    expect(again).not.toBeNull();
    await again?.release();
  });

  it("calls answered out of order within their bound are each heard", async () => {
    const slots = semaphore({ client: held((n) => (n % 2 === 1 ? 150 : 0)), limit: 10, leaseMs: 10_000 });
    const id = randomUUID();
    const leases = await Promise.all(Array.from({ length: 8 }, () => slots.acquire(id)));
    expect(leases.every((lease) => lease !== null)).toBe(true);
    expect(await slots.count(id)).toBe(8);
    for (const lease of leases) await lease?.release();
    expect(await slots.count(id)).toBe(0);
  });
});
