import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { CHANNELS, redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";

// A failing reproduction, not picked up by vitest: to run it, copy it to a *.test.ts name.
// READONLY takes the store down (src/breaker.ts), but the probe is a no-writes script (semaphore-stats),
// which a replica runs: each probe brings the store "up", the next acquire is refused READONLY and takes
// it down again. Measured: 7 store-up (and 8 store-down) events in 2 s, health() flapping, every
// acquire after a probe sent to the replica. The probe cannot see the failure that took the store down.
const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

describe("a client left on a replica (READONLY)", () => {
  it("keeps the store down while every acquire is refused READONLY", async () => {
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
    try {
      const first = await slots.acquire("k").catch((e: unknown) => e);
      expect(first).toBeInstanceOf(StoreUnavailableError);
      expect(String((first as Error).message)).toMatch(/READONLY/);
      expect((await slots.health()).state).toBe("down");
      // Over two seconds, every acquire still fails READONLY; the store must not be reported up meanwhile.
      const until = performance.now() + 2000;
      const states = new Set<string>();
      while (performance.now() < until) {
        const outcome = await slots.acquire("k").catch((e: unknown) => e);
        expect(outcome).toBeInstanceOf(StoreUnavailableError);
        states.add((await slots.health()).state);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect([...states]).toEqual(["down"]);
      expect(ups).toBe(0);
    } finally {
      unsubscribe(CHANNELS.storeUp, onUp);
    }
  }, 20_000);
});
