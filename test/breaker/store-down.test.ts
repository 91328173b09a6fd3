import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import {
  CHANNELS,
  lock,
  redisStore,
  type StoreDownEvent,
  StoreUnavailableError,
  type StoreUpEvent,
  semaphore,
} from "../../src/index.js";
import type { SemaphoreAcquireCall, SemaphoreStatsCall } from "../../src/store/index.js";
import { FaultProxy } from "../faults/proxy.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";

// Issue #15, part 1: with Redis unreachable, only the first call waits out the store's timeout;
// the rest are refused at once until a probe (leasehold's own, on a backoff) answers.
const servers: RedisServer[] = [];
const proxies: FaultProxy[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function behindProxy() {
  const server = await startRedisServer();
  servers.push(server);
  const proxy = new FaultProxy(server.port);
  await proxy.listen();
  proxies.push(proxy);
  const client = new Redis(proxy.url, { maxRetriesPerRequest: null });
  client.on("error", () => {});
  clients.push(client);
  return { proxy, store: redisStore(client, { timeoutMs: 400 }) };
}

function listen<T>(name: string): { events: T[]; stop: () => void } {
  const events: T[] = [];
  const handler = (message: unknown) => events.push(message as T);
  subscribe(name, handler);
  return { events, stop: () => unsubscribe(name, handler) };
}

/** How long a call takes to settle, and how. */
async function timed<T>(call: () => Promise<T>): Promise<{ ms: number; outcome: T | unknown }> {
  const started = performance.now();
  const outcome = await call().catch((error: unknown) => error);
  return { ms: performance.now() - started, outcome };
}

describe("a store that cannot be reached", () => {
  it("fails every call at once after the first failure, for as long as it is down, then admits again within one probe", async () => {
    const { proxy, store } = await behindProxy();
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 5, prefix });
    const locks = lock({ client: store, prefix: `${prefix}-l` });
    const down = listen<StoreDownEvent>(CHANNELS.storeDown);
    const up = listen<StoreUpEvent>(CHANNELS.storeUp);
    try {
      expect(await slots.acquire("k")).not.toBeNull();
      expect(await slots.health()).toEqual({ state: "up", store: "redis" });
      proxy.stall();
      // The first call waits out the timeout (400 ms) and takes the store down.
      const first = await timed(() => slots.acquire("k"));
      expect(first.outcome).toBeInstanceOf(StoreUnavailableError);
      expect(down.events).toHaveLength(1);
      // Every call in the next five seconds is refused at once, with when to come back.
      const until = performance.now() + 5000;
      let refused = 0;
      while (performance.now() < until) {
        const calls: (() => Promise<unknown>)[] = [
          () => slots.acquire("k"),
          () => slots.stats("k"),
          () => locks.acquire("k"),
          () => slots.run("k", () => 1),
        ];
        for (const call of calls) {
          const { ms, outcome } = await timed(call);
          expect(outcome).toBeInstanceOf(StoreUnavailableError);
          expect(ms).toBeLessThan(50);
          const retryAfterMs = (outcome as StoreUnavailableError).retryAfterMs;
          expect(retryAfterMs).toBeGreaterThan(0);
          expect(retryAfterMs).toBeLessThanOrEqual(2000);
          refused++;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(refused).toBeGreaterThan(100);
      const health = await slots.health();
      expect(health).toMatchObject({ state: "down", store: "redis" });
      expect(health.nextProbeInMs).toBeLessThanOrEqual(2000);
      expect(health.lastError).toBeInstanceOf(Error);
      // Still one store-down, however many refusals.
      expect(down.events).toHaveLength(1);

      proxy.resume();
      const back = performance.now();
      // The first probe after Redis returns answers; from then on calls go through. The longest
      // wait between probes is 2 s, plus the probe's own round trip.
      await eventually(async () => (await slots.acquire("k").catch(() => null)) !== null, 5000, 20);
      expect(performance.now() - back).toBeLessThan(2000 + 400 + 500);
      expect(up.events).toHaveLength(1);
      expect(await slots.health()).toEqual({ state: "up", store: "redis" });
    } finally {
      down.stop();
      up.stop();
    }
  }, 30_000);

  it("renewals and releases are never held back: a held lease keeps its loss detection, and its renewal brings the store back up", async () => {
    const { store } = await behindProxy();
    // Acquires and reads that never answer (the store is unreachable for them); renewals and releases answer.
    let hang = false;
    const never = new Promise<never>(() => {});
    const halfDown = Object.assign(Object.create(store), {
      semaphore: {
        ...store.semaphore,
        acquire: (call: SemaphoreAcquireCall) => (hang ? never : store.semaphore.acquire(call)),
        stats: (call: SemaphoreStatsCall) => (hang ? never : store.semaphore.stats(call)),
      },
    });
    const slots = semaphore({ client: halfDown, limit: 2, prefix: uniquePrefix(), leaseMs: 3000 });
    const lease = await slots.acquire("k");
    hang = true;
    await expect(slots.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await slots.health()).state).toBe("down");
    // Refused at once while down, but the holder's renewal is sent and answered, and proves the store is up.
    expect(await lease?.extend()).toBe(true);
    expect(lease?.signal.aborted).toBe(false);
    expect((await slots.health()).state).toBe("up");
    hang = false;
    expect(await lease?.release()).toBe(true);
  }, 30_000);

  it("an error the store answers with does not take it down (a script error, a missing permission)", async () => {
    const { store } = await behindProxy();
    const broken = Object.assign(Object.create(store), {
      semaphore: {
        ...store.semaphore,
        acquire: () => Promise.reject(new Error("NOPERM this user has no permissions to run the 'evalsha' command")),
      },
    });
    const slots = semaphore({ client: broken, limit: 1, prefix: uniquePrefix() });
    for (let n = 0; n < 3; n++) {
      const error = await slots.acquire("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect((error as StoreUnavailableError).retryAfterMs).toBeUndefined();
    }
    expect((await slots.health()).state).toBe("up");
  });
});
