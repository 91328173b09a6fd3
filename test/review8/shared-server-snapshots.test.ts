// review8: two Redis stores (two clients, as two processes) on one id of one server, with gathered
// full acquires (joins), tenants with caps, weights 1 to 3, waiting and fail-fast callers, aborts,
// and a third party taking short leases by token that it never gives back (they lapse: pruning
// runs inside gathered calls). The server's own view is sampled all along (semaphore-inspect.lua,
// one atomic read): the live permits never pass the limit nor a tenant's its cap; every call
// settles; at the end nothing is held or queued and no key of the id is left without an expiry.
import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

const LIMIT = 4;
const CAP = 2;

describe("review8: two stores on one server, sampled by the server", () => {
  it("never more live permits than the limit, nor a tenant's past its cap; nothing left behind", async () => {
    const clients = [newRedis(), newRedis(), newRedis()];
    const prefix = uniquePrefix();
    const slots = clients.slice(0, 2).map((client) => semaphore(client, { limit: LIMIT, prefix }));
    const raw = redisStore(clients[2] as (typeof clients)[number]);
    const key = storeKey(prefix, "semaphore", "k");
    let seed = Number(process.env.REVIEW8_SEED ?? 4242);
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const violations: string[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const seen = await raw.semaphore.inspect({ storeKey: key });
        let used = 0;
        const byTenant = new Map<string, number>();
        for (const holder of seen.holders) {
          used += holder.weight;
          const at = holder.token.indexOf("@");
          if (at >= 0) {
            const tenant = holder.token.slice(at + 1);
            byTenant.set(tenant, (byTenant.get(tenant) ?? 0) + holder.weight);
          }
        }
        if (used > LIMIT) violations.push(`${used} live permits: ${JSON.stringify(seen.holders)}`);
        for (const [tenant, held] of byTenant) if (held > CAP) violations.push(`tenant ${tenant} holds ${held}`);
      }
    })();
    const rounds = Number(process.env.REVIEW8_ROUNDS ?? 40);
    for (let round = 0; round < rounds; round++) {
      const calls: unknown[] = [];
      // The third party: a short lease by token, never given back.
      if (rand(3) === 0) {
        const tenant = rand(2) === 0 ? "" : "@a";
        calls.push(
          raw.semaphore.acquire({
            storeKey: key,
            token: `raw${round}${tenant}`,
            limit: LIMIT,
            weight: 1,
            leaseMs: 5 + rand(30),
            ...(tenant === "" ? {} : { tenant: { limit: CAP, maxQueue: 0 } }),
          }),
        );
      }
      for (let i = 0; i < 10; i++) {
        const store = slots[rand(2)] as (typeof slots)[number];
        const weight = 1 + rand(3);
        const pick = rand(3);
        const tenant = pick === 0 || weight > CAP ? undefined : pick === 1 ? "a" : "b";
        const waiting = rand(4) !== 0;
        const controller = new AbortController();
        if (waiting && rand(5) === 0) setTimeout(() => controller.abort(new Error("client left")), rand(20));
        const body = rand(15);
        calls.push(
          store
            .run("k", () => new Promise((resolve) => setTimeout(resolve, body)), {
              weight,
              ...(tenant === undefined ? {} : { tenant, tenantLimit: CAP }),
              ...(waiting ? { waitMs: 3_000, signal: controller.signal } : {}),
            })
            .catch((error: Error) => error.name),
        );
      }
      const settled = await Promise.race([
        Promise.all(calls).then(() => true),
        new Promise((resolve) => setTimeout(() => resolve(false), 15_000)),
      ]);
      expect(settled, `round ${round} settled`).toBe(true);
    }
    sampling = false;
    await sampler;
    expect(violations.slice(0, 5)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 60));
    const left = await raw.semaphore.inspect({ storeKey: key });
    expect(left.holders.filter((holder) => !holder.token.startsWith("raw"))).toEqual([]);
    expect(left.waiters).toEqual([]);
    const redis = clients[0] as (typeof clients)[number];
    for (const name of await redis.keys(`${key}*`)) expect([name, await redis.pttl(name)]).not.toEqual([name, -1]);
  }, 120_000);
});
