// review7: live bursts on one id from two Redis stores (two clients, as two processes would be):
// tenants with caps and tenantless callers, weights 1 and 2, waiting callers and fail-fast ones,
// aborts, and bodies that end together (their full releases gathered into one script call). What
// each body holds is counted in this process while it runs: the id's limit and each tenant's cap
// must hold at every moment, every call must settle, and nothing may be left held at the end.
import { describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

const LIMIT = 3;
const CAP = 2;

describe("review7: live bursts on one id from two Redis stores", () => {
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
        let seed = Number(process.env.REVIEW7_SEED ?? 12345);
        const rand = (n: number) => {
          seed = (seed * 1103515245 + 12345) % 2147483648;
          return seed % n;
        };
        for (let round = 0; round < Number(process.env.REVIEW7_ROUNDS ?? 60); round++) {
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
