import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisStore, SemaphoreNotAcquiredError, semaphore } from "../../src/index.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";

// Pausing a server stops every client of it: this file owns a private one.
describe("waiting while Redis does not answer", () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  const connect = () => {
    const client = new Redis(server.url);
    client.on("error", () => {});
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.stop();
  });

  it("a wait ends within waitMs plus one store timeout, and leaves nothing behind once Redis answers again", async () => {
    const timeoutMs = 500;
    const waitMs = 1_000;
    const slots = semaphore({ client: redisStore(connect(), { timeoutMs }), limit: 1, prefix: "paused" });
    const holder = await slots.acquire("k");
    const started = performance.now();
    const waiting = slots
      .run("k", async () => "ran", { waitMs })
      .catch((error: unknown) => ({
        error,
        ms: performance.now() - started,
      }));
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    // Every command of every client waits 6 s: the waiter's leave included.
    await connect().call("CLIENT", "PAUSE", "6000", "ALL");

    const outcome = await waiting;
    expect(outcome).toMatchObject({ error: { reason: "wait-timeout" } });
    expect((outcome as { error: unknown }).error).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect((outcome as { ms: number }).ms).toBeLessThan(waitMs + 3 * timeoutMs);

    // The leave was sent before the report and lands when Redis resumes: only the holder is left.
    await eventually(async () => {
      const stats = await slots.stats("k").catch(() => undefined);
      return stats?.used === 1 && stats.waiting === 0;
    }, 15_000);
    expect(await holder?.release()).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0, waiting: 0 });
  }, 30_000);
});
