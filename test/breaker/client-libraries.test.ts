import { Redis } from "ioredis";
import { createClient } from "redis";
import { createClient as createClient5 } from "redis5";
import { afterEach, describe, expect, it } from "vitest";
import { lock, type RedisClient, redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";

// The breaker over each client library: Redis killed (the client sees its own error shape: a
// closed socket, a refused reconnect, a timeout), then started again on the same port. The store
// must go down, refuse at once, and come back up by its own probe, for a semaphore and a lock alike.
const servers: RedisServer[] = [];
const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) {
    try {
      await close();
    } catch {
      // already closed
    }
  }
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

const clients: [string, (url: string) => RedisClient][] = [
  [
    "ioredis",
    (url) => {
      const client = new Redis(url, { maxRetriesPerRequest: null });
      client.on("error", () => {});
      closers.push(() => client.disconnect());
      return client;
    },
  ],
  [
    "node-redis",
    (url) => {
      const client = createClient({ url });
      closers.push(() => client.isOpen && client.destroy());
      return client as unknown as RedisClient;
    },
  ],
  [
    "node-redis 5",
    (url) => {
      const client = createClient5({ url });
      closers.push(() => client.isOpen && client.destroy());
      return client as unknown as RedisClient;
    },
  ],
];

describe.each(clients)("the breaker over %s", (_name, make) => {
  it("goes down when Redis dies, refuses at once, and comes back up by its own probe when Redis returns", async () => {
    const server = await startRedisServer();
    servers.push(server);
    // A generous bound: the node-redis clients connect on first use, and this machine is shared.
    const store = redisStore(make(server.url), { timeoutMs: 2000 });
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 3, prefix });
    const locks = lock({ client: store, prefix: `${prefix}-l` });
    const held = await locks.acquire("k", { ttlMs: 60_000 });
    expect(held).not.toBeNull();
    await server.stop();
    servers.splice(0);
    await expect(slots.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await slots.health()).state).toBe("down");
    const refused = await locks.acquire("other").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).retryAfterMs).toBeGreaterThan(0);
    // Back on the same port (empty: no persistence).
    servers.push(await startRedisServer([], server.port));
    await eventually(async () => (await slots.health()).state === "up", 10_000, 50);
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    await lease?.release();
    const lockLease = await locks.acquire("k");
    expect(lockLease).not.toBeNull();
    await lockLease?.release();
  }, 30_000);
});
