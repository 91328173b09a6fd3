import { createClient } from "redis";
import { afterEach, describe, expect, it } from "vitest";
import { lock, redisStore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { exitOf, killChildren, spawnChild } from "../support/child.js";
import { newRedis, redisUrl, uniquePrefix, watchDuplicates } from "../support/redis.js";
import { eventually } from "../support/stores.js";

afterEach(() => killChildren());

const CASES = [
  { client: "ioredis", store: "implicit" },
  { client: "ioredis", store: "explicit" },
  { client: "node-redis", store: "implicit" },
  { client: "node-redis", store: "explicit" },
  { client: "memory", store: "implicit" },
  { client: "memory", store: "explicit" },
];

describe("a process that closes what leasehold gave it", () => {
  it.each(CASES)(
    "exits by itself, and another process sees every permit free at once ($client, $store store)",
    async ({ client, store }) => {
      const prefix = uniquePrefix("shutdown");
      const child = spawnChild("test/support/shutdown-child.ts", {
        REDIS_URL: redisUrl(),
        CLIENT: client,
        STORE: store,
        PREFIX: prefix,
      });
      await child.next("ready");
      const redis = client === "memory" ? undefined : redisStore(newRedis());
      const seen = redis && { slots: semaphore({ client: redis, limit: 2, prefix }), locks: lock({ client: redis, prefix }) };
      if (seen !== undefined) expect(await seen.slots.stats("held")).toMatchObject({ used: 2, waiting: 1 });

      child.process.kill("SIGTERM");
      const closed = await child.next("closed");
      // Read the moment the child says close() resolved, before it even quits its client: not a lease later.
      if (seen !== undefined) {
        expect(await seen.slots.stats("held")).toMatchObject({ used: 0, waiting: 0 });
        expect((await seen.locks.stats("order")).held).toBe(false);
        expect((await redis?.lock.inspect({ storeKey: storeKey(prefix, "lock", "order") }))?.waiters).toEqual([]);
      }
      expect(closed.outcomes).toEqual({
        run: "ShutdownError",
        lockRun: "ShutdownError",
        waiter: "ShutdownError",
        lockWaiter: "ShutdownError",
        heldSignal: "ShutdownError",
      });
      // On the embedded store, nothing at all is left running (with Redis, the client's own connection is).
      if (client === "memory") expect((closed.resources as string[]).filter((kind) => kind !== "PipeWrap")).toEqual([]);
      // No process.exit in the child: nothing of leasehold's (a connection, a timer) may keep it alive.
      expect(await exitOf(child)).toEqual({ code: 0, signal: null });
    },
    40_000,
  );
});

describe("the connections leasehold opens for itself", () => {
  const observer = newRedis();
  /** Connections named `name` on the server: a client's own, and the subscriber duplicated from it. */
  const named = async (name: string): Promise<number> => {
    const list = (await observer.client("LIST")) as string;
    return list.split("\n").filter((line) => line.includes(` name=${name} `)).length;
  };

  it("a store made from your client closes its subscriber with the last semaphore or lock on it; your client stays open", async () => {
    const name = uniquePrefix("conn");
    const client = newRedis(redisUrl(), { connectionName: name });
    // The connections leasehold duplicates from yours, to see them end.
    const duplicates = watchDuplicates(client);
    const prefix = uniquePrefix();
    const first = semaphore(client, { limit: 1, prefix });
    const second = lock(client, { prefix });
    const held = await first.acquire("k");
    const waiting = first.acquire("k", { waitMs: 60_000 }).catch((error: unknown) => error);
    // Waiting subscribes on a connection of leasehold's own, duplicated from yours (same name).
    await eventually(async () => (await named(name)) === 2);
    await first.close({ graceMs: 0 });
    expect(((await waiting) as Error).name).toBe("ShutdownError");
    expect(held?.signal.aborted).toBe(true);
    // Still used by the lock: left open.
    expect(await second.run("order", () => "ran")).toBe("ran");
    await second.close();
    // Ended when close() resolves, not a second later when an idle subscriber would be let go.
    expect(duplicates.map((made) => made.status)).toEqual(["end"]);
    await eventually(async () => (await named(name)) === 1);
    expect(await client.ping()).toBe("PONG");
    // A semaphore made later on the same client gets a store of its own again, and can wait.
    const later = semaphore(client, { limit: 1, prefix });
    const again = await later.acquire("k");
    const next = later.acquire("k", { waitMs: 60_000 });
    await eventually(async () => (await named(name)) === 2);
    await again?.release();
    await (await next)?.release();
    await later.close();
    expect(duplicates.map((made) => made.status)).toEqual(["end", "end"]);
    await eventually(async () => (await named(name)) === 1);
  });

  it("node-redis: the duplicate leasehold made for waiting is closed with the store, your client is not", async () => {
    const name = uniquePrefix("conn");
    const client = createClient({ url: redisUrl(), name });
    client.on("error", () => {});
    await client.connect();
    try {
      const store = redisStore(client);
      const slots = semaphore({ client: store, limit: 1, prefix: uniquePrefix() });
      const held = await slots.acquire("k");
      const waiting = slots.acquire("k", { waitMs: 60_000 }).catch((error: unknown) => error);
      await eventually(async () => (await named(name)) === 2);
      await slots.close({ graceMs: 0 });
      expect(((await waiting) as Error).name).toBe("ShutdownError");
      expect(held?.signal.aborted).toBe(true);
      await store.close();
      await eventually(async () => (await named(name)) === 1);
      expect(client.isOpen).toBe(true);
      expect(await client.sendCommand(["PING"])).toBe("PONG");
    } finally {
      client.destroy();
    }
  });
});
