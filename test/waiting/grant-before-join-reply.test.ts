// A waiter granted before its own join's reply reached it (found by the tenants benchmark, issue #14): a
// light tenant's request, joining a queue another tenant flooded, is granted by the very next release; that
// release's reply (or its announcement over pub/sub) can reach the process before the join's reply does. The
// process's waiting room, which already listened on the id for its other waiters, dropped the grant of a token
// it did not know yet, and the waiter started only at the room's next refresh, a third of a waiter lease later:
// light requests waited 1.2 to 1.5 s at p99 under the flood, against 5 ms at p50.
import { describe, expect, it } from "vitest";
import { redisStore, type SemaphoreLease, semaphore } from "../../src/index.js";
import type { Grant, Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

describe("a grant heard before the join's reply (Redis)", () => {
  it("the waiter starts on the grant it heard, not at the next refresh", async () => {
    const inner = redisStore(newRedis(), { waiterLeaseMs: 30_000 });
    let refreshes = 0;
    const heard: string[] = [];
    let joined!: () => void;
    const joinedOnServer = new Promise<void>((resolve) => {
      joined = resolve;
    });
    let letReplyThrough!: () => void;
    const held = new Promise<void>((resolve) => {
      letReplyThrough = resolve;
    });
    // The real store, with the reply of globex's join held back until its grant has been heard.
    const store = new Proxy(inner, {
      get(target, property) {
        if (property === "semaphore") {
          const real = target.semaphore;
          return {
            ...real,
            acquire: async (call: Parameters<Store["semaphore"]["acquire"]>[0]) => {
              const reply = await real.acquire(call);
              if (call.token.endsWith("@globex") && reply.queued === true) {
                joined();
                await held;
              }
              return reply;
            },
            refreshWaiters: (call: Parameters<Store["semaphore"]["refreshWaiters"]>[0]) => {
              refreshes++;
              return real.refreshWaiters(call);
            },
          } satisfies Store["semaphore"];
        }
        if (property === "watch") {
          return ({ storeKey, onGrant }: { storeKey: string; onGrant: (grant: Grant) => void }) =>
            target.watch({
              storeKey,
              onGrant: (grant) => {
                onGrant(grant);
                heard.push(...grant.tokens);
              },
            });
        }
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const slots = semaphore({ client: store, limit: 2, tenantLimit: 1, prefix: uniquePrefix(), waitMs: 20_000 });
    const acme = await slots.acquire("k", { tenant: "acme" });
    const other = await slots.acquire("k", { tenant: "initech" });
    // Acme waits at its cap: this process's room listens on the id, and has made its first refresh.
    const acmeWaiting = slots.acquire("k", { tenant: "acme" });
    await eventually(async () => (await slots.stats("k")).waiting === 1 && refreshes === 1);

    let globex: SemaphoreLease | null | undefined;
    const globexWaiting = slots.acquire("k", { tenant: "globex" }).then((lease) => {
      globex = lease;
    });
    await joinedOnServer;
    // Initech's permit goes to globex (acme is at its cap); the room hears it before globex's join reply,
    // twice: in the release's reply and over pub/sub.
    await other?.release();
    await eventually(() => heard.filter((token) => token.endsWith("@globex")).length === 2);
    letReplyThrough();
    await globexWaiting;
    expect(globex).toMatchObject({ tenant: "globex" });
    expect(refreshes, "globex started without waiting for a refresh").toBe(1);

    await acme?.release();
    await (await acmeWaiting)?.release();
    await globex?.release();
    expect(await slots.stats("k")).toMatchObject({ used: 0, waiting: 0 });
  });
});
