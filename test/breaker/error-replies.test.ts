import { Redis } from "ioredis";
import { createClient } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lock, type RedisClient, redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";

// Real error replies from a real server (not messages made up in a wrapper), through ioredis and
// node-redis: each is an answer, so the call fails and the store stays up.
let server: RedisServer;
let admin: Redis;
const closers: (() => unknown)[] = [];
beforeAll(async () => {
  server = await startRedisServer(["--maxmemory-policy", "noeviction"]);
  admin = new Redis(server.url);
  await admin.call("ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all", "-evalsha", "-eval");
});
afterAll(async () => {
  for (const close of closers.splice(0)) await close();
  admin.disconnect();
  await server.stop();
});

const clients: [string, (url: string) => RedisClient][] = [
  [
    "ioredis",
    (url) => {
      const client = new Redis(url);
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
];

describe.each(clients)("error replies over %s", (_name, make) => {
  it("WRONGTYPE: a key of the wrong type fails its call, the store stays up for the others", async () => {
    const prefix = uniquePrefix();
    const store = redisStore(make(server.url));
    await admin.hset(storeKey(prefix, "semaphore", "k"), "x", "1");
    const slots = semaphore({ client: store, limit: 2, prefix });
    const error = await slots.acquire("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(String((error as Error).message)).toMatch(/WRONGTYPE/);
    expect((await slots.health()).state).toBe("up");
    expect(await slots.acquire("other")).not.toBeNull();
    await admin.hset(storeKey(prefix, "lock", "k"), "x", "1");
    const locks = lock({ client: store, prefix });
    await expect(locks.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await locks.health()).state).toBe("up");
  });

  it("NOPERM: a user who may not run scripts fails every call, and the store is not called down", async () => {
    const url = server.url.replace("redis://", "redis://noscripts:pw@");
    const slots = semaphore({ client: redisStore(make(url)), limit: 2, prefix: uniquePrefix() });
    for (let n = 0; n < 3; n++) {
      const error = await slots.acquire("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(String((error as Error).message)).toMatch(/NOPERM|no permissions/);
      expect((error as StoreUnavailableError).retryAfterMs).toBeUndefined();
    }
    expect((await slots.health()).state).toBe("up");
  });

  it("OOM at maxmemory: new acquires are refused, holders still release, the store stays up", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore({ client: redisStore(make(server.url)), limit: 5, prefix });
    const held = await slots.acquire("k");
    expect(held).not.toBeNull();
    const used = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))?.[1]);
    await admin.config("SET", "maxmemory", String(used - 1024 * 1024 > 0 ? Math.max(1, used - 1024 * 1024) : 1));
    try {
      const error = await slots.acquire("k").catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(String((error as Error).message)).toMatch(/OOM/);
      expect((await slots.health()).state).toBe("up");
      expect(await held?.release()).toBe(true);
    } finally {
      await admin.config("SET", "maxmemory", "0");
    }
  });
});
