import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { lock, redisStore, semaphore } from "../../src/index.js";
import { FaultProxy } from "../faults/proxy.js";
import { uniquePrefix } from "../support/redis.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";

const servers: RedisServer[] = [];
const proxies: FaultProxy[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

// A waiter's process sees Redis stall long enough for the breaker to trip (its own refreshes time
// out); the holder, in another process (its own client, not behind the proxy), releases meanwhile.
// Once Redis answers again the waiter must get the grant: its claims are refused while the breaker
// is down, but nothing may leave it waiting until its deadline, nor the permit reserved for nobody.
describe.each(["lock", "semaphore"] as const)("a %s waiter across a stall that trips its breaker", (kind) => {
  it("is granted once the store answers again, well before its deadline", async () => {
    const server = await startRedisServer();
    servers.push(server);
    const proxy = new FaultProxy(server.port);
    await proxy.listen();
    proxies.push(proxy);
    const viaProxy = new Redis(proxy.url, { maxRetriesPerRequest: null });
    const direct = new Redis(server.url);
    for (const client of [viaProxy, direct]) {
      client.on("error", () => {});
      clients.push(client);
    }
    const prefix = uniquePrefix();
    const make = (client: Redis) => {
      const store = redisStore(client, { timeoutMs: 1000, waiterLeaseMs: 3000 });
      return kind === "lock"
        ? lock({ client: store, prefix, ttlMs: 30_000 })
        : semaphore({ client: store, limit: 1, prefix, leaseMs: 30_000 });
    };
    const holderSide = make(direct);
    const waiterSide = make(viaProxy);
    const held = await holderSide.acquire("k");
    expect(held).not.toBeNull();
    const started = performance.now();
    const waiting = waiterSide.acquire("k", { waitMs: 20_000 });
    // The waiter is queued.
    await eventually(async () => ((await holderSide.stats("k")) as { waiting?: number }).waiting !== 0 || kind === "lock");
    await new Promise((resolve) => setTimeout(resolve, 200));
    proxy.stall();
    await eventually(async () => (await waiterSide.health()).state === "down", 10_000);
    expect(await held?.release()).toBe(true);
    // Redis answers the waiter's process again after a while.
    await new Promise((resolve) => setTimeout(resolve, 800));
    proxy.resume();
    const lease = await waiting;
    expect(lease).not.toBeNull();
    expect(performance.now() - started).toBeLessThan(15_000);
    await lease?.release();
  }, 30_000);
});
