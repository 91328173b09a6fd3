import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { CHANNELS, redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";

// A regression: READONLY took the store down, but the probe is a no-writes script, which a replica
// runs: each probe brought the store "up", the next acquire took it down again (7 store-up and 8
// store-down events in 2 s). READONLY is now an answer, as every error reply but those that mean "no
// call can be served" (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN): each acquire fails at once naming it,
// and the store's state does not flap.
const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

describe("a client left on a replica (READONLY)", () => {
  it("fails every acquire at once with READONLY, and the store's state does not flap", async () => {
    const primary = await startRedisServer();
    servers.push(primary);
    const replica = await startRedisServer(["--replicaof", "127.0.0.1", String(primary.port)]);
    servers.push(replica);
    const client = new Redis(replica.url);
    client.on("error", () => {});
    clients.push(client);
    const slots = semaphore({ client: redisStore(client, { timeoutMs: 500 }), limit: 5, prefix: uniquePrefix() });
    let ups = 0;
    const onUp = () => {
      ups++;
    };
    subscribe(CHANNELS.storeUp, onUp);
    subscribe(CHANNELS.storeDown, onUp);
    try {
      const first = await slots.acquire("k").catch((e: unknown) => e);
      expect(first).toBeInstanceOf(StoreUnavailableError);
      expect(String((first as Error).message)).toMatch(/READONLY/);
      expect((await slots.health()).state).toBe("up");
      // Over two seconds, every acquire still fails READONLY, sent each time; the state never changes.
      const until = performance.now() + 2000;
      const states = new Set<string>();
      while (performance.now() < until) {
        const outcome = await slots.acquire("k").catch((e: unknown) => e);
        expect(outcome).toBeInstanceOf(StoreUnavailableError);
        expect(String((outcome as Error).message)).toMatch(/READONLY/);
        states.add((await slots.health()).state);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect([...states]).toEqual(["up"]);
      expect(ups).toBe(0);
    } finally {
      unsubscribe(CHANNELS.storeUp, onUp);
      unsubscribe(CHANNELS.storeDown, onUp);
    }
  }, 20_000);
});
