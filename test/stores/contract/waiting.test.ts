import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { describe, expect, it } from "vitest";
import {
  CHANNELS,
  LockNotAcquiredError,
  lock,
  type SemaphoreLease,
  SemaphoreLeaseLostError,
  SemaphoreNotAcquiredError,
  type StoreErrorEvent,
  StoreUnavailableError,
  semaphore,
  ValidationError,
} from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { Grant, Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate, spyStore, storesUnderTest } from "../../support/stores.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `body` while recording the store errors published for stores of kind
 * `kind`, and every unhandled rejection or uncaught exception of the process.
 */
async function watchingFailures<T>(
  kind: string,
  body: (seen: { storeErrors: StoreErrorEvent[] }) => Promise<T>,
): Promise<{ result: T; storeErrors: StoreErrorEvent[]; crashes: unknown[] }> {
  const storeErrors: StoreErrorEvent[] = [];
  const crashes: unknown[] = [];
  const onStoreError = (event: unknown) => {
    if ((event as StoreErrorEvent).store === kind) storeErrors.push(event as StoreErrorEvent);
  };
  const onCrash = (reason: unknown) => crashes.push(reason);
  subscribe(CHANNELS.storeError, onStoreError);
  process.on("unhandledRejection", onCrash);
  process.on("uncaughtException", onCrash);
  try {
    const result = await body({ storeErrors });
    // Rejections are reported unhandled once the microtask queue drains: let it.
    await new Promise((resolve) => setImmediate(resolve));
    return { result, storeErrors, crashes };
  } finally {
    unsubscribe(CHANNELS.storeError, onStoreError);
    process.off("unhandledRejection", onCrash);
    process.off("uncaughtException", onCrash);
  }
}

describe.each(storesUnderTest)("waiting on the $name store", ({ make }) => {
  /** A spied store with a long waiter lease: its periodic refresh (every third) never fires within a test. */
  const setup = (waiterLeaseMs = 60_000) => {
    const { store, calls } = spyStore(make({ waiterLeaseMs }), {}, 5_000);
    const prefix = uniquePrefix();
    return { store, calls, prefix };
  };

  it("admits waiters in arrival order as permits free", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const order: number[] = [];
    const waiters: Promise<void>[] = [];
    for (let n = 0; n < 5; n++) {
      const before = calls.semaphoreAcquire;
      waiters.push(
        slots.run(
          "k",
          async () => {
            order.push(n);
            await pause(5);
          },
          { waitMs: 10_000 },
        ),
      );
      // The next waiter joins only once this one's first attempt has queued it.
      await eventually(() => calls.semaphoreAcquire > before);
    }
    await holder?.release();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(await slots.count("k")).toBe(0);
  });

  it("hands a released permit to the head waiter by notification, not by a poll", async () => {
    const { store, calls, prefix } = setup(60_000);
    const slots = semaphore({ client: store, limit: 1, prefix, leaseMs: 60_000 });
    const holder = await slots.acquire("k");
    const waiting = slots.acquire("k", { waitMs: 30_000 });
    await eventually(() => calls.semaphoreAcquire === 2);
    await holder?.release();
    const lease = await waiting;
    expect(lease).not.toBeNull();
    // The fallback refresh runs every 20 s and the backup timer waits for the 60 s lease:
    // neither ran, so the grant's announcement is what woke the waiter.
    expect(calls.semaphoreRefreshWaiters).toBeLessThanOrEqual(1);
    expect(lease?.waitedMs).toBeGreaterThan(0);
    expect(lease?.waitedMs).toBeLessThan(20_000);
    await lease?.release();
  });

  it("waitMs expiring rejects with the NotAcquired error, and the waiter leaves the queue", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const expired = slots.run("k", async () => "never", { waitMs: 150 }).catch((e: unknown) => e);
    await eventually(() => calls.semaphoreAcquire === 2);
    const behind = slots.acquire("k", { waitMs: 10_000 });
    const error = await expired;
    expect(error).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect(error).toMatchObject({ reason: "wait-timeout", key: "k", limit: 1 });
    await holder?.release();
    const lease = await behind;
    expect(lease).not.toBeNull();
    expect(await slots.count("k")).toBe(1);
    await lease?.release();
  });

  it("an aborted waiter rejects with the signal's reason and does not block those behind it", async () => {
    const { store, calls, prefix } = setup();
    const locks = lock({ client: store, prefix });
    const holder = await locks.acquire("k");
    const controller = new AbortController();
    const aborted = locks.acquire("k", { waitMs: 10_000, signal: controller.signal }).catch((e: unknown) => e);
    await eventually(() => calls.lockAcquire === 2);
    const behind = locks.acquire("k", { waitMs: 10_000 });
    await eventually(() => calls.lockAcquire === 3);
    const reason = new Error("client went away");
    controller.abort(reason);
    expect(await aborted).toBe(reason);
    await holder?.release();
    const lease = await behind;
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it("maxQueue refuses the overflow at once", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 1, prefix, maxQueue: 2 });
    const holder = await slots.acquire("k");
    const queued = [slots.acquire("k", { waitMs: 10_000 }), slots.acquire("k", { waitMs: 10_000 })];
    await eventually(() => calls.semaphoreAcquire === 3);
    const started = performance.now();
    const overflow = await slots.run("k", async () => 1, { waitMs: 10_000 }).catch((e: unknown) => e);
    expect(overflow).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect(overflow).toMatchObject({ reason: "queue-full" });
    // The queue never grew past maxQueue: the refused caller left nothing behind.
    expect((await slots.stats("k")).waiting).toBe(2);
    expect(performance.now() - started).toBeLessThan(5_000);
    await holder?.release();
    // Each in turn: the second is admitted only once the first gives its permit back.
    const first = await queued[0];
    await first?.release();
    const second = await queued[1];
    expect(second).not.toBeNull();
    await second?.release();
  });

  it("a heavy waiter at the head holds back lighter ones behind it (strict order)", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 3, prefix });
    const holder = await slots.acquire("k", { weight: 2 });
    const admitted: string[] = [];
    const heavy = slots.acquire("k", { weight: 2, waitMs: 10_000 }).then((lease) => {
      admitted.push("heavy");
      return lease;
    });
    await eventually(() => calls.semaphoreAcquire === 2);
    const light = slots.acquire("k", { weight: 1, waitMs: 10_000 }).then((lease) => {
      admitted.push("light");
      return lease;
    });
    await eventually(() => calls.semaphoreAcquire === 3);
    // One permit is free, enough for "light", but "heavy" is ahead of it.
    await pause(100);
    expect(admitted).toEqual([]);
    await holder?.release();
    const leases = await Promise.all([heavy, light]);
    expect(admitted).toEqual(["heavy", "light"]);
    for (const lease of leases) await lease?.release();
  });

  it("a newcomer never jumps the queue, even when it would fit", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 2, prefix });
    const holder = await slots.acquire("k");
    const heavy = slots.acquire("k", { weight: 2, waitMs: 10_000 });
    await eventually(() => calls.semaphoreAcquire === 2);
    expect(await slots.acquire("k")).toBeNull();
    await holder?.release();
    const lease = await heavy;
    expect(lease?.weight).toBe(2);
    await lease?.release();
  });

  it("a waiter whose process vanished lapses, and the one behind it is admitted", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const key = storeKey(prefix, "semaphore", "k");
    // A waiter that nobody refreshes or claims: its process is gone.
    const ghost = await store.semaphore.acquire({
      storeKey: key,
      token: "ghost",
      limit: 1,
      weight: 1,
      leaseMs: 60_000,
      queue: { waiterLeaseMs: 300, maxQueue: 0 },
    });
    expect(ghost.queued).toBe(true);
    const behind = slots.acquire("k", { waitMs: 10_000 });
    await eventually(() => calls.semaphoreAcquire === 3);
    await holder?.release();
    // The ghost is granted first (strict order) but never claims; its grant lapses after its waiter lease.
    const lease = await behind;
    expect(lease).not.toBeNull();
    expect(lease?.waitedMs).toBeGreaterThanOrEqual(250);
    await lease?.release();
    expect(await slots.count("k")).toBe(0);
  });

  it("a grant announced before this process listened is not missed, even when its waiter never claims it", async () => {
    const { store: spied, calls, prefix } = setup();
    // Subscribing is held back until after the release, so the ghost's grant is announced to nobody here.
    const listening = gate();
    const store: Store = {
      ...spied,
      watch: async ({ storeKey: key, onGrant }) => {
        await listening.opened;
        return spied.watch({ storeKey: key, onGrant });
      },
    };
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const ghost = await store.semaphore.acquire({
      storeKey: storeKey(prefix, "semaphore", "k"),
      token: "ghost",
      limit: 1,
      weight: 1,
      leaseMs: 60_000,
      queue: { waiterLeaseMs: 300, maxQueue: 0 },
    });
    expect(ghost.queued).toBe(true);
    const behind = slots.acquire("k", { waitMs: 10_000 });
    await eventually(() => calls.semaphoreAcquire === 3);
    await holder?.release();
    listening.open();
    // Only the ghost's lapsing reservation frees the permit; the next lease expiry is a minute away.
    const lease = await behind;
    expect(lease).not.toBeNull();
    expect(lease?.waitedMs).toBeGreaterThanOrEqual(250);
    await lease?.release();
  });

  it("grants announced while a process subscribes start their holders in queue order", async () => {
    const { store: spied, calls, prefix } = setup();
    const listening = gate();
    const refreshing = gate();
    let refreshCalls = 0;
    let delivered = 0;
    const store: Store = {
      ...spied,
      // No periodic refresh during the test (a third of the waiter lease): under load one could fire
      // before the subscription and be taken for the refresh that follows it.
      waiterLeaseMs: 60_000,
      // The subscription is ready only when the test says, and then hears everything.
      watch: async ({ storeKey: key, onGrant }) => {
        await listening.opened;
        return spied.watch({
          storeKey: key,
          onGrant: (grant) => {
            delivered++;
            onGrant(grant);
          },
        });
      },
      // The first refresh after subscribing waits, so an announcement can overtake it.
      semaphore: {
        ...spied.semaphore,
        refreshWaiters: async (call) => {
          refreshCalls++;
          await refreshing.opened;
          return spied.semaphore.refreshWaiters(call);
        },
      },
    };
    const slots = semaphore({ client: store, limit: 3, prefix });
    const blockers = await Promise.all([slots.acquire("k"), slots.acquire("k"), slots.acquire("k")]);
    const order: number[] = [];
    const runs: Promise<void>[] = [];
    for (let n = 0; n < 3; n++) {
      const before = calls.semaphoreAcquire;
      runs.push(slots.run("k", async () => void order.push(n), { waitMs: 10_000 }));
      await eventually(() => calls.semaphoreAcquire > before);
    }
    // Waiters 0 and 1 are granted before this process listens: nobody hears it.
    await blockers[0]?.release();
    await blockers[1]?.release();
    listening.open();
    await eventually(() => refreshCalls === 1);
    // Waiter 2 is granted and announced while the refresh that reveals 0 and 1 is pending.
    await blockers[2]?.release();
    await eventually(() => delivered === 1);
    refreshing.open();
    await Promise.all(runs);
    expect(order).toEqual([0, 1, 2]);
  });

  it("locks queue in arrival order too", async () => {
    const { store, calls, prefix } = setup();
    const locks = lock({ client: store, prefix });
    const holder = await locks.acquire("order");
    const order: number[] = [];
    const waiters: Promise<void>[] = [];
    for (let n = 0; n < 4; n++) {
      const before = calls.lockAcquire;
      waiters.push(locks.run("order", async () => void order.push(n), { waitMs: 10_000 }));
      await eventually(() => calls.lockAcquire > before);
    }
    await holder?.release();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3]);
    const timeout = await locks.run("order", async () => 1, { waitMs: 1 }).catch((e: unknown) => e);
    expect(timeout === 1 || timeout instanceof LockNotAcquiredError).toBe(true);
  });

  it("waitMs and retries together are refused: pick one way to wait", async () => {
    const { store, prefix } = setup();
    const slots = semaphore({ client: store, limit: 1, prefix });
    await expect(slots.acquire("k", { waitMs: 100, retries: 3 })).rejects.toBeInstanceOf(ValidationError);
    expect(() => lock({ client: store, waitMs: 100, retries: 1 })).toThrow(/pass one of them/);
    await expect(slots.acquire("k", { maxQueue: 0 })).rejects.toMatchObject({ option: "maxQueue" });
  });

  it("a granted waiter starts without a claim round trip, and an extend confirms its full lease a little later", async () => {
    const { store, calls } = setup(60_000);
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix(), leaseMs: 30_000 });
    const holder = await slots.acquire("k");
    const started = gate();
    const finish = gate();
    const waiter = slots.run(
      "k",
      async (lease) => {
        started.open();
        await finish.opened;
        return lease.signal.aborted;
      },
      { waitMs: 10_000 },
    );
    await eventually(() => calls.semaphoreAcquire === 2);
    await holder?.release();
    await started.opened;
    // The join was the waiter's only acquire: the grant's announcement started it.
    expect(calls.semaphoreAcquire).toBe(2);
    // Not confirmed at once: a body that ends soon gives the permit back without the extend.
    expect(calls.semaphoreExtend).toBe(0);
    await eventually(() => calls.semaphoreExtend === 1);
    finish.open();
    expect(await waiter).toBe(false);
    expect(await slots.count("k")).toBe(0);
  });

  it("a handed-off lease given back before its confirmation costs no extend", async () => {
    const { store, calls } = setup(60_000);
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix(), leaseMs: 30_000 });
    const holder = await slots.acquire("k");
    const waiter = slots.run("k", async (lease) => lease.fence, { waitMs: 10_000 });
    await eventually(() => calls.semaphoreAcquire === 2);
    await holder?.release();
    expect(typeof (await waiter)).toBe("number");
    // The join, the holder's release and the waiter's: nothing else went to the store for the lease.
    expect(calls.semaphoreAcquire).toBe(2);
    expect(calls.semaphoreExtend).toBe(0);
    expect(calls.semaphoreRelease).toBe(2);
    expect(await slots.count("k")).toBe(0);
  });

  it("a grant heard when the waiter cannot know its reservation is long enough is claimed before the waiter starts", async () => {
    // No refresh answers: the waiter's only "still waiting" answer is its join, so after two thirds of
    // its waiter lease it cannot prove the grant is still reserved, and must claim it first.
    let refreshesHang = true;
    const { store, calls } = spyStore(
      make({ waiterLeaseMs: 1_200 }),
      { semaphoreRefreshWaiters: () => (refreshesHang ? "hang" : undefined) },
      1_000,
    );
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const holder = await slots.acquire("k");
    let joinedAt = 0;
    let acquiresAtStart = 0;
    const waiter = slots.run(
      "k",
      async () => {
        acquiresAtStart = calls.semaphoreAcquire;
      },
      { waitMs: 10_000 },
    );
    await eventually(() => calls.semaphoreAcquire === 2);
    joinedAt = performance.now();
    await eventually(() => performance.now() - joinedAt > 900, 5_000);
    await holder?.release();
    refreshesHang = false;
    await waiter;
    // The join, then the claim: the body started only once the store answered the claim.
    expect(acquiresAtStart).toBe(3);
  });

  it("a handed-off lease whose grant is gone is lost, and told, at its confirmation", async () => {
    const { store } = setup(60_000);
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 1, prefix, leaseMs: 30_000 });
    const holder = await slots.acquire("k");
    const lost = gate<unknown>();
    // The grant is taken back (as an operator's release would) before the confirming extend lands.
    const confirm = store.semaphore.extend;
    (store as { semaphore: Store["semaphore"] }).semaphore = {
      ...store.semaphore,
      extend: async (call) => {
        await store.semaphore.leave(call);
        return confirm(call);
      },
    };
    const waiter = slots
      .run(
        "k",
        async (lease) => {
          lease.signal.addEventListener("abort", () => lost.open(lease.signal.reason));
          await lost.opened;
        },
        { waitMs: 10_000 },
      )
      .catch((error: unknown) => error);
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    await holder?.release();
    expect(await lost.opened).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(await waiter).toBeInstanceOf(SemaphoreLeaseLostError);
  });

  it("a claim whose reply comes after the store timeout keeps the waiter's place: the first waiter is still admitted first", async () => {
    // A short waiter lease: the room's refresh (every 500 ms) is a wake-up that claims again.
    let refreshesHang = true;
    const { store: spied, calls } = spyStore(
      make({ waiterLeaseMs: 1_500 }),
      { semaphoreRefreshWaiters: () => (refreshesHang ? "hang" : undefined) },
      1_000,
    );
    const prefix = uniquePrefix();
    const lateReply = gate();
    let first: string | undefined;
    let firstCalls = 0;
    let answeredLate = false;
    let joinedAt = 0;
    const store: Store = {
      ...spied,
      semaphore: {
        ...spied.semaphore,
        acquire: async (call) => {
          const { token, queue } = call;
          if (queue !== undefined && first === undefined) {
            first = token;
            joinedAt = performance.now();
          }
          const reply = await spied.semaphore.acquire(call);
          // The first waiter's first claim reaches the store, which grants it; the answer arrives after the timeout.
          if (token === first && ++firstCalls === 2) {
            await lateReply.opened;
            answeredLate = true;
          }
          return reply;
        },
      },
    };
    const slots = semaphore({ client: store, limit: 1, prefix });
    const holder = await slots.acquire("k");
    const order: string[] = [];
    const w1 = slots.run(
      "k",
      async () => {
        order.push("W1");
        expect(order).toEqual(["W1"]);
        lateReply.open();
        await eventually(() => answeredLate);
        // The late answer to the timed-out claim must not free the lease a later claim made usable.
        expect((await slots.stats("k")).used).toBe(1);
        expect(order).toEqual(["W1"]);
      },
      { waitMs: 15_000 },
    );
    await eventually(() => calls.semaphoreAcquire === 2);
    const w2 = slots.run("k", async () => void order.push("W2"), { waitMs: 15_000 });
    await eventually(() => calls.semaphoreAcquire === 3);
    // With no refresh answered since it joined, W1 cannot know its grant will be reserved long enough
    // to start without a claim once two thirds of its waiter lease have passed: it claims.
    await eventually(() => performance.now() - joinedAt > 1_100, 5_000);
    await holder?.release();
    refreshesHang = false;
    await Promise.all([w1, w2]);
    expect(order).toEqual(["W1", "W2"]);
    expect(await slots.stats("k")).toMatchObject({ used: 0, waiting: 0 });
  });

  it("a wait given up while the store does not answer its leave settles within waitMs plus one store timeout", async () => {
    const { store, calls } = spyStore(make({ waiterLeaseMs: 60_000 }), { semaphoreLeave: () => "hang" }, 500);
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const holder = await slots.acquire("k");
    const started = performance.now();
    const waiting = slots
      .run("k", async () => "ran", { waitMs: 1_000 })
      .catch((error: unknown) => ({
        error,
        ms: performance.now() - started,
      }));
    // Far beyond the bound below: without it, the call would hang here for as long as the leave does.
    let giveUp: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      waiting,
      new Promise((resolve) => {
        giveUp = setTimeout(() => resolve("still waiting"), 15_000);
      }),
    ]);
    clearTimeout(giveUp);
    expect(outcome).toMatchObject({ error: { reason: "wait-timeout" } });
    expect((outcome as { ms: number }).ms).toBeLessThan(1_000 + 3 * 500);
    expect(calls.semaphoreLeave).toBe(1);
    await holder?.release();
  });

  it("a waiter refresh that never answers does not stop the next ones", async () => {
    const { store, calls } = spyStore(
      make({ waiterLeaseMs: 1_500 }),
      { semaphoreRefreshWaiters: (n) => (n === 1 ? "hang" : undefined) },
      500,
    );
    const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    const holder = await slots.acquire("k");
    const waiting = slots.acquire("k", { waitMs: 15_000 });
    // Every 500 ms; the first hangs. Without a bound it would be "in flight" forever and block the rest.
    await eventually(() => calls.semaphoreRefreshWaiters >= 4);
    expect((await slots.stats("k")).waiting).toBe(1);
    await holder?.release();
    const lease = await waiting;
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  describe("a store answering nonsense while callers wait", () => {
    /**
     * A real store whose answers to the waiting-room calls can be replaced, as a store of another
     * process (a spy store): its waits go through the waiting room, whatever store it wraps.
     */
    const wrapped = (waiterLeaseMs: number, changes: (real: Store) => Partial<Store>) => {
      const real = spyStore(make({ waiterLeaseMs })).store;
      const store: Store = { ...real, ...changes(real), kind: "garbled" };
      return semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
    };

    const refreshes: [string, unknown][] = [
      ["an empty object", {}],
      ["null", null],
      ["fewer statuses than waiters", { statuses: [], retryAfterMs: 5 }],
      ["more statuses than waiters", { statuses: ["waiting", "held"], retryAfterMs: 5 }],
      ["an unknown status", { statuses: ["maybe"], retryAfterMs: 5 }],
      ["a negative delay", { statuses: ["waiting"], retryAfterMs: -1 }],
      ["a delay no timer can hold", { statuses: ["waiting"], retryAfterMs: 2 ** 40 }],
    ];

    it.each(refreshes)(
      "a waiter refresh answered with %s is a store error, and the grant still admits the waiter",
      async (_, garbage) => {
        const { result, storeErrors, crashes } = await watchingFailures("garbled", async ({ storeErrors }) => {
          // The real refresh still runs (the waiter keeps its place); only its answer is replaced.
          const slots = wrapped(600, (real) => ({
            semaphore: {
              ...real.semaphore,
              refreshWaiters: async (call) => {
                await real.semaphore.refreshWaiters(call);
                return garbage as never;
              },
            },
          }));
          const holder = await slots.acquire("k");
          let released = false;
          const waiting = slots.acquire("k", { waitMs: 15_000 }).then((lease) => ({ lease, released }));
          await eventually(() => storeErrors.filter((event) => event.operation === "refresh").length >= 2);
          released = true;
          await holder?.release();
          const outcome = await waiting;
          await outcome.lease?.release();
          return { ...outcome, after: await slots.stats("k") };
        });
        expect(crashes).toEqual([]);
        expect(result.lease).not.toBeNull();
        expect(result.released).toBe(true);
        expect(result.after).toMatchObject({ used: 0, waiting: 0 });
        expect(storeErrors.length).toBeGreaterThanOrEqual(2);
        for (const event of storeErrors) {
          expect(event).toMatchObject({ operation: "refresh", kind: "semaphore", id: "k" });
          expect(event.error).toBeInstanceOf(StoreUnavailableError);
        }
      },
    );

    it("a watch that resolves a number instead of a function is a store error; the waiter refresh still admits the waiter", async () => {
      const { result, storeErrors, crashes } = await watchingFailures("garbled", async () => {
        const slots = wrapped(600, () => ({ watch: async () => 42 as never }));
        const holder = await slots.acquire("k");
        const waiting = slots.acquire("k", { waitMs: 15_000 });
        await holder?.release();
        const lease = await waiting;
        await lease?.release();
        return { lease, after: await slots.stats("k") };
      });
      expect(crashes).toEqual([]);
      expect(result.lease).not.toBeNull();
      expect(result.after).toMatchObject({ used: 0, waiting: 0 });
      expect(storeErrors.map((event) => event.operation)).toEqual(["watch"]);
    });

    it("a watch whose stop function throws is a store error when the last waiter goes, not a crash", async () => {
      const { result, storeErrors, crashes } = await watchingFailures("garbled", async () => {
        const slots = wrapped(600, () => ({
          watch: async () => () => {
            throw new Error("cannot unsubscribe");
          },
        }));
        const holder = await slots.acquire("k");
        const waiting = slots.acquire("k", { waitMs: 15_000 });
        await holder?.release();
        const lease = await waiting;
        await lease?.release();
        return { lease };
      });
      expect(crashes).toEqual([]);
      expect(result.lease).not.toBeNull();
      expect(storeErrors.map((event) => event.operation)).toEqual(["unwatch"]);
      expect(storeErrors[0]?.error.message).toMatch(/cannot unsubscribe/);
    });

    it("a grant announced as nonsense is a store error and wakes nobody; the real grant admits the waiter", async () => {
      const { result, storeErrors, crashes } = await watchingFailures("garbled", async () => {
        let announced = false;
        const slots = wrapped(60_000, (real) => ({
          watch: async ({ storeKey: key, onGrant }) => {
            const stop = await real.watch({ storeKey: key, onGrant });
            queueMicrotask(() => {
              for (const garbage of [null, {}, { tokens: "all", waiterLeaseMs: 5 }, { tokens: [7], waiterLeaseMs: 5 }]) {
                onGrant(garbage as unknown as Grant);
              }
              announced = true;
            });
            return stop;
          },
        }));
        const holder = await slots.acquire("k");
        let settled = false;
        const waiting = slots.acquire("k", { waitMs: 15_000 }).finally(() => {
          settled = true;
        });
        await eventually(() => announced);
        const settledEarly = settled;
        await holder?.release();
        const lease = await waiting;
        await lease?.release();
        return { settledEarly, lease };
      });
      expect(crashes).toEqual([]);
      expect(result.settledEarly).toBe(false);
      expect(result.lease).not.toBeNull();
      expect(storeErrors.map((event) => event.operation)).toEqual(["grant", "grant", "grant", "grant"]);
    });

    it("with both the refresh and the watch answering nonsense, the wait ends at waitMs and leaves nothing behind", async () => {
      const { result, storeErrors, crashes } = await watchingFailures("garbled", async () => {
        const slots = wrapped(600, (real) => ({
          watch: async () => "listening" as never,
          semaphore: {
            ...real.semaphore,
            refreshWaiters: async (call) => {
              await real.semaphore.refreshWaiters(call);
              return null as never;
            },
          },
        }));
        const holder = await slots.acquire("k");
        const started = performance.now();
        const refused = await slots.run("k", async () => "ran", { waitMs: 1_000 }).catch((error: unknown) => error);
        const waitedMs = performance.now() - started;
        await holder?.release();
        return { refused, waitedMs, after: await slots.stats("k") };
      });
      expect(crashes).toEqual([]);
      expect(result.refused).toBeInstanceOf(SemaphoreNotAcquiredError);
      expect(result.refused).toMatchObject({ reason: "wait-timeout" });
      expect(result.waitedMs).toBeGreaterThanOrEqual(990);
      expect(result.after).toMatchObject({ used: 0, holders: 0, waiting: 0 });
      expect(storeErrors.some((event) => event.operation === "watch")).toBe(true);
      expect(storeErrors.some((event) => event.operation === "refresh")).toBe(true);
    });
  });

  it("many waiters and a limit: never more than the limit inside, everyone served in order", async () => {
    const { store, calls, prefix } = setup();
    const slots = semaphore({ client: store, limit: 3, prefix });
    let inside = 0;
    let maxInside = 0;
    const order: number[] = [];
    const blockers = await Promise.all([slots.acquire("k"), slots.acquire("k"), slots.acquire("k")]);
    const runs: Promise<void>[] = [];
    for (let n = 0; n < 12; n++) {
      const before = calls.semaphoreAcquire;
      runs.push(
        slots.run(
          "k",
          async () => {
            inside++;
            maxInside = Math.max(maxInside, inside);
            order.push(n);
            await pause(10 + (n % 3) * 5);
            inside--;
          },
          { waitMs: 20_000 },
        ),
      );
      await eventually(() => calls.semaphoreAcquire > before);
    }
    for (const lease of blockers) await lease?.release();
    await Promise.all(runs);
    expect(maxInside).toBeLessThanOrEqual(3);
    expect(order).toEqual([...Array(12).keys()]);
    const leases: SemaphoreLease[] = [];
    expect(leases).toHaveLength(0);
  });
});
