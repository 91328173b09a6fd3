// The Redis store's gathered calls (src/store/redis/coalesce.ts, fast.ts): calls of one turn on one id
// go out as script calls of at most 16 items, a full one sent at once rather than at the end of the
// turn, and every caller still gets its own answer, in the order the calls were made.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { CHANNELS, redisStore, type SemaphoreLease, StoreUnavailableError, semaphore } from "../../../src/index.js";
import { scripts } from "../../../src/store/redis/lua.generated.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";
import { eventually } from "../../support/stores.js";

/** The fail-fast acquires' script calls the client sends, as the number of items each carries. */
function countTakes(redis: Redis): number[] {
  const items: number[] = [];
  const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
  (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) => {
    const keys = Number(args[1]);
    // semaphore-acquire-fast.lua: five arguments per item, or three for one item of weight 1.
    if (args[0] === scripts.semaphoreAcquireFast.sha) {
      const count = args.length - 2 - keys;
      items.push(count === 3 ? 1 : count / 5);
    }
    return evalsha(...args);
  };
  return items;
}

const clients: Redis[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

/** A connected client whose fail-fast acquires are counted, a store over it, and an id of its own. */
async function counted() {
  const redis = newRedis();
  clients.push(redis);
  await redis.ping();
  return { redis, sent: countTakes(redis), store: redisStore(redis), key: `{${uniquePrefix()}:k}` };
}

describe("calls gathered in one turn on the Redis store", () => {
  it("40 acquires in one turn: two go at once, the rest in calls of at most 16, each caller its own fence in order", async () => {
    const { redis, sent, store, key } = await counted();
    const calls = Array.from({ length: 40 }, (_, i) =>
      store.semaphore.acquire({ storeKey: key, token: `t${i}`, limit: 100, weight: 1, leaseMs: 10_000 }),
    );
    const replies = await Promise.all(calls);
    expect(sent).toEqual([1, 1, 16, 16, 6]);
    const fences = replies.map((reply) => (reply.acquired ? Number(reply.fence) : Number.NaN));
    expect(fences.every((fence, i) => i === 0 || fence > (fences[i - 1] as number))).toBe(true);
    expect(await redis.zcount(key, 0, "+inf")).toBe(40);
    await Promise.all(
      calls.map((_, i) => store.semaphore.release({ storeKey: key, token: `t${i}`, weight: 1, heldMs: undefined })),
    );
    expect(await redis.exists(key)).toBe(0);
    await store.close();
  });

  it("a batch of 16 goes out at once, before the turn ends; a smaller one at the turn's end", async () => {
    const { redis, sent, store, key } = await counted();
    const take = (i: number) =>
      Promise.resolve(store.semaphore.acquire({ storeKey: key, token: `t${i}`, limit: 100, weight: 1, leaseMs: 10_000 }));
    // Two go at once, then ten are gathered: the ten wait for the end of the turn.
    const few = Array.from({ length: 12 }, (_, i) => take(i));
    expect(sent).toEqual([1, 1]);
    await Promise.all(few);
    expect(sent).toEqual([1, 1, 10]);
    // Two at once, then sixteen gathered: the sixteenth sends them, in the same turn.
    const many = Array.from({ length: 18 }, (_, i) => take(100 + i));
    expect(sent).toEqual([1, 1, 10, 1, 1, 16]);
    const replies = await Promise.all(many);
    expect(replies.every((reply) => reply.acquired)).toBe(true);
    expect(sent).toEqual([1, 1, 10, 1, 1, 16]);
    await store.close();
    await redis.del(key);
  });

  it("calls made one per callback in one turn (an HTTP server's requests), while two are out, go out together", async () => {
    const { redis, sent, store, key } = await counted();
    const take = (i: number) =>
      Promise.resolve(store.semaphore.acquire({ storeKey: key, token: `t${i}`, limit: 100, weight: 1, leaseMs: 10_000 }));
    // Timers due together run in one timers phase, each callback followed by its microtasks, and no
    // reply can be read in between: the two first calls are out while the five others are made.
    const calls = await new Promise<Promise<unknown>[]>((resolve) => {
      const made: Promise<unknown>[] = [];
      setTimeout(() => made.push(take(0), take(1)), 0);
      for (let i = 2; i < 7; i++) setTimeout(() => made.push(take(i)), 0);
      setTimeout(() => resolve(made), 0);
    });
    const replies = (await Promise.all(calls)) as { acquired: boolean; fence?: unknown }[];
    expect(sent).toEqual([1, 1, 5]);
    expect(replies.every((reply) => reply.acquired)).toBe(true);
    const fences = replies.map((reply) => Number(reply.fence));
    expect(fences.every((fence, i) => i === 0 || fence > (fences[i - 1] as number))).toBe(true);
    expect(await redis.zcount(key, 0, "+inf")).toBe(7);
    await store.close();
    await redis.del(key);
  });

  it("a call waiting for the end of the turn goes out before any follow-up of an earlier call's reply", async () => {
    const { redis, store, key } = await counted();
    const order: string[] = [];
    const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) => {
      order.push(
        args[0] === scripts.semaphoreAcquireFast.sha
          ? `take ${String(args[2 + Number(args[1])])}`
          : args[0] === scripts.semaphoreAcquire.sha
            ? `full ${String(args[2 + Number(args[1])])}`
            : "other",
      );
      return evalsha(...args);
    };
    // One holder and one waiter: every fast acquire answers "waiters here" and goes on to the full script.
    const other = redisStore(redis);
    await other.semaphore.acquire({ storeKey: key, token: "h", limit: 1, weight: 1, leaseMs: 10_000 });
    await other.semaphore.acquire({
      storeKey: key,
      token: "w",
      limit: 1,
      weight: 1,
      leaseMs: 10_000,
      queue: { waiterLeaseMs: 10_000, maxQueue: 0 },
    });
    order.length = 0;
    // Made in a setImmediate callback: the third call's end of the turn is the next turn's, after its
    // I/O. The callback then stays busy long enough (a generous 50 ms on localhost) for the first two
    // replies to be waiting when that I/O is read, as under load.
    const calls = await new Promise<Promise<unknown>[]>((resolve) =>
      setImmediate(() => {
        const made = ["a", "b", "c"].map((token) =>
          Promise.resolve(store.semaphore.acquire({ storeKey: key, token, limit: 1, weight: 1, leaseMs: 10_000 })),
        );
        const until = performance.now() + 50;
        while (performance.now() < until) {}
        resolve(made);
      }),
    );
    await Promise.all(calls);
    expect(order.slice(0, 3)).toEqual(["take a", "take b", "take c"]);
    expect(order.filter((call) => call.startsWith("full"))).toEqual(["full a", "full b", "full c"]);
    await store.close();
    await other.close();
    await redis.del(key, `${key}:q`, `${key}:w`);
  });

  it("a lone call while fewer than two are out goes at once, not at the end of the turn", async () => {
    const { redis, sent, store, key } = await counted();
    const first = store.semaphore.acquire({ storeKey: key, token: "t0", limit: 100, weight: 1, leaseMs: 10_000 });
    expect(sent).toEqual([1]);
    await first;
    await store.close();
    await redis.del(key);
  });
});

// Issue #27, defect 2: two renewals of an id out, a third was held for the end of the turn while the
// release of its lease went out at once; the script answered the late renewal "not ours" and the lease
// given back was reported lost (its signal aborted, the lost event published).
describe("calls of one lease reach the store in the order they were made", () => {
  it("a release made after a gathered renewal of the same lease goes out after it; nothing is reported lost", async () => {
    const { store } = await counted();
    const slots = semaphore({ client: store, limit: 3, prefix: uniquePrefix() });
    const leases = await Promise.all([slots.acquire("k"), slots.acquire("k"), slots.acquire("k")]);
    const [a, b, c] = leases.map((lease) => {
      if (lease === null) throw new Error("expected a lease");
      return lease;
    }) as [SemaphoreLease, SemaphoreLease, SemaphoreLease];
    const lost: unknown[] = [];
    const listener = (event: unknown) => lost.push(event);
    subscribe(CHANNELS.lost, listener);
    try {
      const extended = [a.extend(), b.extend(), c.extend()];
      const released = c.release();
      expect(await Promise.all(extended)).toEqual([true, true, true]);
      expect(await released).toBe(true);
      expect(c.signal.aborted).toBe(false);
      expect(await slots.count("k")).toBe(2);
      expect(await Promise.all([a.release(), b.release()])).toEqual([true, true]);
    } finally {
      unsubscribe(CHANNELS.lost, listener);
    }
    expect(lost).toEqual([]);
    await slots.close();
    await store.close();
  });

  it("a renewal a store answers only after the lease's release (a store that reorders) is not a loss", async () => {
    const { store } = await counted();
    // The first renewal is held back until the release has been answered; the second goes at once.
    let renewals = 0;
    let released: () => void = () => {};
    const releaseAnswered = new Promise<void>((resolve) => {
      released = resolve;
    });
    const late: typeof store = {
      ...store,
      semaphore: {
        ...store.semaphore,
        release: (call) =>
          Promise.resolve(store.semaphore.release(call)).then((answer) => {
            released();
            return answer;
          }),
        extend: (call) =>
          ++renewals === 1 ? releaseAnswered.then(() => store.semaphore.extend(call)) : store.semaphore.extend(call),
      },
    };
    const slots = semaphore({ client: late, limit: 3, prefix: uniquePrefix() });
    const lease = await slots.acquire("k");
    if (lease === null) throw new Error("expected a lease");
    const lost: unknown[] = [];
    const listener = (event: unknown) => lost.push(event);
    subscribe(CHANNELS.lost, listener);
    try {
      const first = lease.extend();
      const second = lease.extend();
      const answer = lease.release();
      expect(await second).toBe(true);
      expect(await answer).toBe(true);
      expect(await first).toBe(false);
      expect(lease.signal.aborted).toBe(false);
    } finally {
      unsubscribe(CHANNELS.lost, listener);
    }
    expect(lost).toEqual([]);
    await slots.close();
    await store.close();
  });

  it("after SCRIPT FLUSH (a failover, a restart), a renewal sent again as EVAL still reaches the server before the release", async () => {
    const { redis, store } = await counted();
    const slots = semaphore({ client: store, limit: 3, prefix: uniquePrefix() });
    const lease = await slots.acquire("k");
    if (lease === null) throw new Error("expected a lease");
    // The release's script is loaded, the renewal's is not: the renewal alone answers NOSCRIPT and goes again.
    await redis.script("FLUSH");
    await redis.script("LOAD", scripts.semaphoreReleaseFast.source);
    const lost: unknown[] = [];
    const listener = (event: unknown) => lost.push(event);
    subscribe(CHANNELS.lost, listener);
    try {
      const extended = lease.extend();
      const released = lease.release();
      expect(await extended).toBe(true);
      expect(await released).toBe(true);
      expect(lease.signal.aborted).toBe(false);
    } finally {
      unsubscribe(CHANNELS.lost, listener);
    }
    expect(lost).toEqual([]);
    expect(await slots.count("k")).toBe(0);
    await slots.close();
    await store.close();
  });
});

/**
 * The calls of one script (by SHA), as the items each carries (`perItem` arguments each); `fail` rejects
 * those of more than one item. Full releases carry three arguments per lease, full acquires eight per caller.
 */
function countItems(redis: Redis, sha: string, perItem: number, fail = false): number[] {
  const items: number[] = [];
  const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
  (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) => {
    if (args[0] !== sha) return evalsha(...args);
    items.push((args.length - 2 - Number(args[1])) / perItem);
    if (fail && (items[items.length - 1] as number) > 1) return Promise.reject(new Error("connection lost (injected)"));
    return evalsha(...args);
  };
  return items;
}

const countReleases = (redis: Redis, fail = false) => countItems(redis, scripts.semaphoreRelease.sha, 3, fail);

describe("full releases gathered in one turn on an id with waiters", () => {
  it("past the first two, one call; each caller its own answer; the waiters granted in queue order, as one release after another", async () => {
    const redis = newRedis();
    clients.push(redis);
    await redis.ping();
    const sent = countReleases(redis);
    const store = redisStore(redis);
    const key = `{${uniquePrefix()}:k}`;
    const queue = { waiterLeaseMs: 30_000, maxQueue: 0 };
    const acquire = (token: string) =>
      store.semaphore.acquire({ storeKey: key, token, limit: 4, weight: 1, leaseMs: 30_000, queue });
    for (const token of ["h0", "h1", "h2", "h3"]) expect((await acquire(token)).acquired).toBe(true);
    for (const token of ["w0", "w1", "w2", "w3", "w4", "w5"]) expect((await acquire(token)).queued).toBe(true);
    const grants: string[] = [];
    const fences: number[] = [];
    const stop = await store.watch({
      storeKey: key,
      onGrant: (grant) => {
        grants.push(...grant.tokens);
        fences.push(...grant.fences);
      },
    });
    const answers = await Promise.all(
      ["h0", "h1", "h2", "h3", "nobody"].map((token) => store.semaphore.release({ storeKey: key, token, weight: 1 })),
    );
    expect(answers).toEqual([true, true, true, true, false]);
    expect(sent).toEqual([1, 1, 3]);
    const inspection = await store.semaphore.inspect({ storeKey: key });
    expect(inspection.holders.map((holder) => holder.token).sort()).toEqual(["w0", "w1", "w2", "w3"]);
    expect(inspection.waiters.map((waiter) => waiter.token)).toEqual(["w4", "w5"]);
    // Heard in the reply and again over pub/sub: each grant once per copy, in queue order, fences rising.
    await eventually(() => grants.length === 8);
    const once = [...new Set(grants)];
    expect(once).toEqual(["w0", "w1", "w2", "w3"]);
    const firstFences = once.map((token) => fences[grants.indexOf(token)] as number);
    expect(firstFences.every((fence, i) => i === 0 || fence > (firstFences[i - 1] as number))).toBe(true);
    stop();
    await store.close();
    await redis.del(key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`);
  });

  it("one lease's release failing in a gathered call fails that caller alone; the others go on, as calls of their own", async () => {
    const redis = newRedis();
    clients.push(redis);
    await redis.ping();
    const store = redisStore(redis);
    const key = `{${uniquePrefix()}:k}`;
    const queue = { waiterLeaseMs: 30_000, maxQueue: 0 };
    const acquire = (token: string) =>
      store.semaphore.acquire({ storeKey: key, token, limit: 5, weight: 1, leaseMs: 30_000, queue });
    for (const token of ["h0", "h1", "h2", "h3", "h4"]) expect((await acquire(token)).acquired).toBe(true);
    for (const token of ["w0", "w1", "w2", "w3", "w4"]) expect((await acquire(token)).queued).toBe(true);
    // The release of "h3" (the second of the gathered call) goes with a weight no store sends: its part of the script fails before any write.
    const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) =>
      evalsha(...args.map((arg, i) => (i > 0 && args[i - 1] === "h3" ? "not a weight" : arg)));
    const answers = await Promise.allSettled(
      ["h0", "h1", "h2", "h3", "h4"].map((token) => store.semaphore.release({ storeKey: key, token, weight: 1 })),
    );
    expect(answers.map((answer) => answer.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "rejected", "fulfilled"]);
    expect(String((answers[3] as PromiseRejectedResult).reason)).toContain("semaphore-release.lua: ERR");
    const inspection = await store.semaphore.inspect({ storeKey: key });
    expect(inspection.holders.map((holder) => holder.token).sort()).toEqual(["h3", "w0", "w1", "w2", "w3"]);
    expect(inspection.waiters.map((waiter) => waiter.token)).toEqual(["w4"]);
    await store.close();
    await redis.del(key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`);
  });

  it("a shared call that fails fails every release in it, as StoreUnavailableError; each lease can be released again", async () => {
    const prefix = uniquePrefix();
    const ours = newRedis();
    const theirs = newRedis();
    clients.push(ours, theirs);
    await Promise.all([ours.ping(), theirs.ping()]);
    const sent = countReleases(ours, true);
    const here = semaphore({ client: ours, limit: 4, prefix });
    const there = semaphore({ client: theirs, limit: 4, prefix });
    const leases = await Promise.all([0, 1, 2, 3].map(() => here.acquire("k")));
    // Another process waits: this one's releases take the full path.
    const waiting = [0, 1].map(() => there.acquire("k", { waitMs: 20_000 }));
    await eventually(async () => (await here.stats("k")).waiting === 2);
    // Refused (the id is full and has waiters): this process now knows the id has waiters, and its
    // releases go to the full path at once, two alone and the rest together.
    expect(await here.acquire("k")).toBeNull();
    const first = await Promise.allSettled(leases.map((lease) => lease?.release()));
    // The first two went alone; the other two together, and failed together.
    const failed = first.filter((outcome) => outcome.status === "rejected");
    expect(sent).toEqual([1, 1, 2]);
    expect(failed.length).toBe(sent.filter((n) => n > 1).reduce((a, b) => a + b, 0));
    for (const outcome of failed) expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    // The outcome was unknown: each lease is still releasable, and is released now (one at a time).
    for (const [i, outcome] of first.entries()) {
      if (outcome.status === "rejected") expect(await leases[i]?.release()).toBe(true);
    }
    const granted = await Promise.all(waiting);
    expect(granted.every((lease) => lease !== undefined)).toBe(true);
    await Promise.all(granted.map((lease) => lease?.release()));
    expect((await here.stats("k")).used).toBe(0);
  });
});

const countJoins = (redis: Redis, fail = false) => countItems(redis, scripts.semaphoreAcquire.sha, 8, fail);

describe("full acquires gathered on an id (the joins of callers that come back together)", () => {
  it("past the first, one call; each caller its own answer, as one call after another; one caller's failure is its own", async () => {
    const redis = newRedis();
    clients.push(redis);
    await redis.ping();
    const store = redisStore(redis);
    const key = `{${uniquePrefix()}:k}`;
    const queue = { waiterLeaseMs: 30_000, maxQueue: 0 };
    const acquire = (token: string, options: { queue?: typeof queue; weight?: number } = { queue }) =>
      store.semaphore.acquire({
        storeKey: key,
        token,
        limit: 2,
        weight: options.weight ?? 1,
        leaseMs: 30_000,
        queue: options.queue,
      });
    for (const token of ["h0", "h1"]) expect((await acquire(token)).acquired).toBe(true);
    const sent = countJoins(redis);
    const joined = await Promise.all(["w0", "w1", "w2", "w3", "w4"].map((token) => acquire(token)));
    expect(sent).toEqual([1, 4]);
    expect(joined.every((reply) => reply.queued === true && reply.retryAfterMs > 0)).toBe(true);
    expect((await store.semaphore.inspect({ storeKey: key })).waiters.map((waiter) => waiter.token)).toEqual([
      "w0",
      "w1",
      "w2",
      "w3",
      "w4",
    ]);
    // Another turn: a holder's re-sent acquire (a new fence), a newcomer refused by its queue's
    // length, one failing fast, one whose arguments fail its step before any write (a waiter lease no store sends), one
    // more waiter: each answered as its own call would be, in order.
    const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) =>
      evalsha(...args.map((arg, i) => (i > 3 && args[i - 4] === "bad" ? "not a waiter lease" : arg)));
    const answers = await Promise.allSettled([
      acquire("h0"),
      acquire("full", { queue: { waiterLeaseMs: 30_000, maxQueue: 3 } }),
      acquire("fast", {}),
      acquire("bad"),
      acquire("w5"),
    ]);
    expect(sent).toEqual([1, 4, 1, 4]);
    const [held, full, fast, bad, last] = answers.map((answer) => (answer.status === "fulfilled" ? answer.value : answer.reason));
    expect(held).toMatchObject({ acquired: true });
    expect(full).toMatchObject({ acquired: false, queueFull: true });
    expect(fast).toMatchObject({ acquired: false });
    expect(fast.queued).toBeUndefined();
    expect(String(bad)).toContain("semaphore-acquire.lua: ERR");
    expect(last).toMatchObject({ acquired: false, queued: true });
    const inspection = await store.semaphore.inspect({ storeKey: key });
    expect(inspection.holders.map((holder) => holder.token).sort()).toEqual(["h0", "h1"]);
    expect(inspection.waiters.map((waiter) => waiter.token)).toEqual(["w0", "w1", "w2", "w3", "w4", "w5"]);
    await store.close();
    await redis.del(key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`);
  });

  it("a shared call that fails fails every caller in it, as StoreUnavailableError; nothing is left queued or held for them", async () => {
    const prefix = uniquePrefix();
    const ours = newRedis();
    clients.push(ours);
    await ours.ping();
    const slots = semaphore({ client: ours, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const sent = countJoins(ours, true);
    const waits = [0, 1, 2].map(() => slots.acquire("k", { waitMs: 20_000 }));
    const [first, ...others] = waits;
    const rest = await Promise.allSettled(others);
    expect(sent.slice(0, 2)).toEqual([1, 2]);
    for (const outcome of rest) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    }
    // The first waited alone, and is granted the permit; the others' clean-up left nothing of theirs.
    await holder?.release();
    const lease = await first;
    expect(lease).not.toBeNull();
    await eventually(async () => (await slots.stats("k")).waiting === 0);
    expect(await slots.stats("k")).toMatchObject({ used: 1, waiting: 0 });
    await lease?.release();
    expect(await slots.stats("k")).toMatchObject({ used: 0, waiting: 0 });
  });
});
