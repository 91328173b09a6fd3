// A gathered full acquire (one semaphore-acquire.lua call for several callers) that runs on
// the server but whose reply comes too late (the server's writes paused past the store's timeout):
// every caller in it fails with StoreUnavailableError, and each one's clean-up of an unknown outcome
// gives back what its token got once the call ran (a place in the queue, or a permit), so that
// nothing stays queued or held for them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisStore, StoreUnavailableError, semaphore } from "../../../src/index.js";
import { scripts } from "../../../src/store/redis/lua.generated.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";
import { type RedisServer, startRedisServer } from "../../support/redis-server.js";
import { eventually } from "../../support/stores.js";

// The test pauses its server's writes: a server of its own, not the run's shared one.
let server: RedisServer;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server.stop();
});

describe("a gathered full acquire answered too late", () => {
  it.each([
    ["queued", 1],
    ["granted", 4],
  ])("fails each caller in it as StoreUnavailableError, and leaves nothing %s for them", async (_, limit) => {
    const client = newRedis(server.url);
    const admin = newRedis(server.url);
    await client.ping();
    const joins: number[] = [];
    const evalsha = client.evalsha.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) => {
      if (args[0] === scripts.semaphoreAcquire.sha) joins.push((args.length - 2 - Number(args[1])) / 8);
      return evalsha(...args);
    };
    const prefix = uniquePrefix();
    const slots = semaphore(redisStore(client, { timeoutMs: 300, waiterLeaseMs: 60_000 }), { limit, prefix });
    // One permit held, so that with limit 1 the callers queue; with 4 there is room for three more.
    const holder = await slots.acquire("k");
    expect(holder).not.toBeNull();
    await admin.call("CLIENT", "PAUSE", "1200", "WRITE");
    const calls = [0, 1, 2, 3].map(() => slots.acquire("k", { waitMs: 20_000 }));
    const outcomes = await Promise.allSettled(calls);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe("rejected");
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(StoreUnavailableError);
    }
    // Past the first, they went out together.
    expect(joins.slice(0, 2)).toEqual([1, 3]);
    await admin.call("CLIENT", "UNPAUSE");
    // Read through a store of its own: this one's breaker refuses at once for a while after a timeout.
    const observer = semaphore(newRedis(server.url), { limit, prefix });
    await eventually(async () => {
      const stats = await observer.stats("k");
      return stats.used === 1 && stats.waiting === 0;
    });
    // Once more after a write on the acquires' connection: whatever their late answers started is done.
    await eventually(async () => (await holder?.release().catch(() => undefined)) === true);
    await eventually(async () => {
      const stats = await observer.stats("k");
      return stats.used === 0 && stats.waiting === 0;
      // Well before a waiter lease (60 s) or a lease could lapse and hide a place left behind.
    }, 3_000);
  });
});
