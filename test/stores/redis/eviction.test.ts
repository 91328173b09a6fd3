// Eviction of one of a semaphore's keys while another stays (a regression: the weights lived in a hash of
// their own, which could be evicted while the holders stayed, forgetting a heavy holder's permits). A holder's
// permits are all members of the holders set now: no other key can be lost apart from them.
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { type RedisServer, startRedisServer } from "../../support/redis-server.js";

const servers: RedisServer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

async function usedMemory(admin: Redis): Promise<number> {
  const info = await admin.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

describe("eviction under maxmemory (README: an evicted lease key -> its holder is told)", () => {
  it("the meta hash evicted before the holders set: a heavy holder's weight is forgotten, newcomers are over-admitted, nobody is told", async () => {
    const server = await startRedisServer(["--maxmemory", "3mb", "--maxmemory-policy", "volatile-ttl"]);
    servers.push(server);
    const client = new Redis(server.url);
    const admin = new Redis(server.url);
    clients.push(client, admin);
    const store = redisStore(client);
    const slots = semaphore({ client: store, limit: 4, prefix: "ev" });
    const key = storeKey("ev", "semaphore", "k");

    // A heavy holder (3 of 4 permits) and a light one (the last permit).
    const heavy = await slots.acquire("k", { weight: 3, leaseMs: 60_000 });
    const light = await slots.acquire("k", { leaseMs: 60_000 });
    expect(heavy).not.toBeNull();
    expect(light).not.toBeNull();
    expect(await slots.acquire("k")).toBeNull(); // full
    // The light holder renews for longer (its lease, its choice): the holders set's TTL rises, the meta hash's does not.
    expect(await light?.extend(600_000)).toBe(true);
    expect(await admin.pttl(`${key}:m`)).toBeLessThan(await admin.pttl(key));

    // Memory pressure: junk without a TTL (never evictable under volatile-ttl) until the server evicts the key
    // with the nearest expiry among the volatile ones: the meta hash.
    // Large values while far from the limit, small ones near it, so that evicting the small meta hash is
    // enough to get back under it and the holders set stays.
    for (let n = 0; n < 20_000 && (await admin.exists(`${key}:m`)) === 1; n++) {
      const room = 3 * 1024 * 1024 - (await usedMemory(admin));
      const size = room > 96 * 1024 ? 32 * 1024 : room > 8 * 1024 ? 1024 : 1;
      await admin.set(`junk:${n}`, "x".repeat(size)).catch(() => {});
    }
    await admin.config("SET", "maxmemory", "0"); // pressure over: nothing more is evicted
    expect(await admin.exists(`${key}:m`), "set-up: the meta hash was evicted").toBe(0);
    expect(await admin.exists(key), "set-up: the holders set (with the marker) stayed").toBe(1);

    // Both holders still hold: their renewals succeed, so neither is told anything.
    expect(await heavy?.extend(), "the heavy holder still renews").toBe(true);
    expect(await light?.extend(), "the light holder still renews").toBe(true);
    expect(heavy?.signal.aborted).toBe(false);
    // The id is full (3 + 1 of 4): a newcomer must be refused.
    const newcomers = [await slots.acquire("k"), await slots.acquire("k")];
    const held = 3 + 1 + newcomers.filter((lease) => lease !== null).length;
    expect(held, "permits held by holders none of whom was told").toBeLessThanOrEqual(4);
  });
});
