import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { redisStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import { eventually } from "../support/stores.js";
import { ownRedis, sleep, startLoads, stopAll, verdictOf } from "./harness.js";
import { FaultProxy } from "./proxy.js";
import { report } from "./report.js";

const proxies: FaultProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await stopAll();
});

async function proxied() {
  const server = await ownRedis();
  const proxy = new FaultProxy(server.port);
  await proxy.listen();
  proxies.push(proxy);
  return { server, proxy };
}

describe("8. a misbehaving network between client and Redis", () => {
  it.each([
    [
      "stall for two leases",
      async (proxy: FaultProxy) => {
        proxy.stall();
        await sleep(2000);
        proxy.resume();
      },
    ],
    [
      "cut every connection, three times",
      async (proxy: FaultProxy) => {
        for (let n = 0; n < 3; n++) {
          proxy.cut();
          await sleep(500);
        }
      },
    ],
  ])("8. proxy: %s", async (name, fault) => {
    const { server, proxy } = await proxied();
    const settings = { url: server.url, prefix: `proxy-${name.split(" ")[0]}`, limit: 8, leaseMs: 1000 };
    const loads = startLoads(proxy.url, settings.prefix, {
      processes: 2,
      callers: 10,
      limit: 8,
      leaseMs: 1000,
      durationMs: 4000,
      holdMin: 20,
      holdMax: 300,
    });
    await sleep(800);
    await fault(proxy);
    await Promise.all(loads.map((load) => load.finished));
    // The leak check reads Redis directly: no ghost permit may survive the faults.
    const { verdict, leaks } = await verdictOf(`8. proxy ${name}`, loads, settings);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
    expect(verdict.operations).toBeGreaterThan(0);
  });

  it("8. proxy drops an acquire's reply after Redis ran it: no ghost permit, no double permit", async () => {
    const { server, proxy } = await proxied();
    const direct = new Redis(server.url);
    const client = new Redis(proxy.url, { maxRetriesPerRequest: null });
    client.on("error", () => {});
    const prefix = "drop";
    const slots = semaphore({ client: redisStore(client, { timeoutMs: 1000 }), limit: 1, prefix, leaseMs: 30_000 });
    const observer = semaphore(direct, { limit: 1, prefix });
    let outcomes = 0;
    let ghosts = 0;
    for (let round = 0; round < 5; round++) {
      await client.ping();
      proxy.dropNextReply();
      const outcome = await slots.acquire("k").catch((error: unknown) => error);
      outcomes++;
      // Never two permits for one caller.
      expect(await observer.count("k")).toBeLessThanOrEqual(1);
      if (outcome instanceof StoreUnavailableError || outcome === null) {
        // Unknown outcome: cleaned up long before the 30 s lease could expire it.
        await eventually(async () => (await observer.count("k")) === 0, 5_000).catch(() => {
          ghosts++;
        });
      } else {
        expect(await (outcome as { release(): Promise<boolean> }).release()).toBe(true);
      }
      expect(await observer.count("k")).toBe(0);
    }
    client.disconnect();
    direct.disconnect();
    report({
      scenario: "8. proxy drops an acquire reply",
      operations: outcomes,
      maxHolders: 1,
      declaredLosses: 0,
      leaks: ghosts,
      verdict: ghosts === 0 ? "pass" : "FAIL",
    });
    expect(ghosts).toBe(0);
  });
});
