// Live bursts on one id from two Redis stores (two clients, as two processes would be):
// tenants with caps and tenantless callers, weights 1 and 2, waiting callers and fail-fast ones,
// aborts, and bodies that end together (their full releases gathered into one script call). What
// each body holds is counted in this process while it runs: the id's limit and each tenant's cap
// must hold at every moment, every call must settle, and nothing may be left held at the end.
import { describe, expect, it } from "vitest";
import { memoryStore, redisStore, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";

const LIMIT = 3;
const CAP = 2;

describe("live bursts on one id from two Redis stores", () => {
  it.each(["redis", "memory"])(
    "never holds past the limit or a tenant's cap, and gives every permit back (%s)",
    async (kind) => {
      const clients = [newRedis(), newRedis()];
      const prefix = uniquePrefix();
      const shared = memoryStore();
      try {
        const slots = clients.map((client) =>
          kind === "redis" ? semaphore(client, { limit: LIMIT, prefix }) : semaphore(shared, { limit: LIMIT }),
        );
        let held = 0;
        let peak = 0;
        const byTenant = new Map<string, number>();
        const violations: string[] = [];
        // Bodies end together: each waits for the burst's gate, opened in one turn.
        let gates: (() => void)[] = [];
        const waitGate = () => new Promise<void>((resolve) => gates.push(resolve));
        let seed = Number(process.env.BURSTS_SEED ?? 12345);
        const rand = (n: number) => {
          seed = (seed * 1103515245 + 12345) % 2147483648;
          return seed % n;
        };
        for (let round = 0; round < Number(process.env.BURSTS_ROUNDS ?? 60); round++) {
          const calls: Promise<unknown>[] = [];
          for (let i = 0; i < 8; i++) {
            const store = slots[rand(2)] as (typeof slots)[number];
            const weight = rand(4) === 0 ? 2 : 1;
            const tenantPick = rand(3);
            const tenant = tenantPick === 0 ? undefined : tenantPick === 1 ? "a" : "b";
            const waiting = rand(3) !== 0;
            const controller = new AbortController();
            if (waiting && rand(6) === 0) queueMicrotask(() => controller.abort(new Error("client left")));
            const options = {
              weight,
              ...(tenant === undefined ? {} : { tenant, tenantLimit: CAP }),
              ...(waiting ? { waitMs: 5_000, signal: controller.signal } : {}),
            };
            calls.push(
              store
                .run(
                  "k",
                  async () => {
                    held += weight;
                    peak = Math.max(peak, held);
                    if (held > LIMIT) violations.push(`round ${round}: ${held} held`);
                    if (tenant !== undefined) {
                      const mine = (byTenant.get(tenant) ?? 0) + weight;
                      byTenant.set(tenant, mine);
                      if (mine > CAP) violations.push(`round ${round}: tenant ${tenant} holds ${mine}`);
                    }
                    await waitGate();
                    held -= weight;
                    if (tenant !== undefined) byTenant.set(tenant, (byTenant.get(tenant) ?? 0) - weight);
                  },
                  options,
                )
                .catch((error: Error) => error.name),
            );
          }
          // Now and then the server forgets the scripts while calls are out (NOSCRIPT, then EVAL).
          if (kind === "redis" && rand(4) === 0) void (clients[0] as (typeof clients)[number]).script("FLUSH");
          // Open the gates, in one turn, until every call of the round has settled.
          let settled = false;
          const all = Promise.all(calls).then(() => {
            settled = true;
          });
          while (!settled) {
            await new Promise((resolve) => setImmediate(resolve));
            const open = gates;
            gates = [];
            for (const resolve of open) resolve();
            await Promise.race([all, new Promise((resolve) => setTimeout(resolve, 5))]);
          }
        }
        expect(violations).toEqual([]);
        expect(peak).toBeGreaterThan(1);
        expect(held).toBe(0);
        const counts = await Promise.all(slots.map((s) => s.count("k")));
        expect(counts).toEqual([0, 0]);
        await Promise.all(slots.map((s) => s.close()));
        // Every key left has an expiry.
        const keys = await (clients[0] as (typeof clients)[number]).keys(`${prefix}*`);
        for (const key of keys) expect(await (clients[0] as (typeof clients)[number]).pttl(key), key).toBeGreaterThan(0);
      } finally {
        for (const client of clients) client.disconnect();
      }
    },
    120_000,
  );
});

// Two Redis stores (two clients, as two processes) on one id of one server, with gathered
// full acquires (joins), tenants with caps, weights 1 to 3, waiting and fail-fast callers, aborts,
// and a third party taking short leases by token that it never gives back (they lapse: pruning
// runs inside gathered calls). The server's own view is sampled all along (semaphore-inspect.lua,
// one atomic read): the live permits never pass the limit nor a tenant's its cap; every call
// settles; at the end nothing is held or queued and no key of the id is left without an expiry.

const SAMPLED_LIMIT = 4;
const SAMPLED_CAP = 2;

describe("two stores on one server, sampled by the server", () => {
  it("never more live permits than the limit, nor a tenant's past its cap; nothing left behind", async () => {
    const clients = [newRedis(), newRedis(), newRedis()];
    const prefix = uniquePrefix();
    const slots = clients.slice(0, 2).map((client) => semaphore(client, { limit: SAMPLED_LIMIT, prefix }));
    const raw = redisStore(clients[2] as (typeof clients)[number]);
    const key = storeKey(prefix, "semaphore", "k");
    let seed = Number(process.env.SAMPLED_SEED ?? 4242);
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
        if (used > SAMPLED_LIMIT) violations.push(`${used} live permits: ${JSON.stringify(seen.holders)}`);
        for (const [tenant, held] of byTenant) if (held > SAMPLED_CAP) violations.push(`tenant ${tenant} holds ${held}`);
      }
    })();
    const rounds = Number(process.env.SAMPLED_ROUNDS ?? 40);
    for (let round = 0; round < rounds; round++) {
      const calls: unknown[] = [];
      // The third party: a short lease by token, never given back.
      if (rand(3) === 0) {
        const tenant = rand(2) === 0 ? "" : "@a";
        calls.push(
          raw.semaphore.acquire({
            storeKey: key,
            token: `raw${round}${tenant}`,
            limit: SAMPLED_LIMIT,
            weight: 1,
            leaseMs: 5 + rand(30),
            ...(tenant === "" ? {} : { tenant: { limit: SAMPLED_CAP, maxQueue: 0 } }),
          }),
        );
      }
      for (let i = 0; i < 10; i++) {
        const store = slots[rand(2)] as (typeof slots)[number];
        const weight = 1 + rand(3);
        const pick = rand(3);
        const tenant = pick === 0 || weight > SAMPLED_CAP ? undefined : pick === 1 ? "a" : "b";
        const waiting = rand(4) !== 0;
        const controller = new AbortController();
        if (waiting && rand(5) === 0) setTimeout(() => controller.abort(new Error("client left")), rand(20));
        const body = rand(15);
        calls.push(
          store
            .run("k", () => new Promise((resolve) => setTimeout(resolve, body)), {
              weight,
              ...(tenant === undefined ? {} : { tenant, tenantLimit: SAMPLED_CAP }),
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
