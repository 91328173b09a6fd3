import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { lock, redisStore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { eventually } from "../support/stores.js";
import { redisForFile } from "./harness.js";
import { report } from "./report.js";

const own = redisForFile();

describe("14. security", () => {
  it("14. tokens are 128 random bits; another client's token cannot release or extend; 100,000 one-off tenants leave no keys", async () => {
    const slots = semaphore(own.redis, { limit: 100_000, prefix: "sec" });
    const leases = await Promise.all(Array.from({ length: 10_000 }, () => slots.acquire("tokens", { leaseMs: 60_000 })));
    // The random part, before the acquire time and owner the token also carries (src/lease/owner.ts).
    const tokens = leases.map((lease) => (lease as { token: string }).token.split(".")[0] as string);
    expect(new Set(tokens).size).toBe(10_000);
    for (const token of tokens) expect(Buffer.from(token, "base64url")).toHaveLength(16);
    // Every bit position varies: no counter, no timestamp prefix.
    const constantBits = Array.from({ length: 128 }, (_, bit) => {
      const values = new Set(tokens.slice(0, 500).map((token) => (Buffer.from(token, "base64url")[bit >> 3]! >> (bit & 7)) & 1));
      return values.size === 1;
    }).filter(Boolean).length;
    expect(constantBits).toBe(0);
    await Promise.all(leases.map((lease) => lease?.release()));

    // Another client, even knowing the key, cannot free or keep someone else's lease.
    const other = redisStore(new Redis(own.server.url));
    const mine = await semaphore(own.redis, { limit: 1, prefix: "sec" }).acquire("owned");
    const held = await lock(own.redis, { prefix: "seclock" }).acquire("owned");
    expect(await other.semaphore.release({ storeKey: storeKey("sec", "semaphore", "owned"), token: "guessed-token" })).toBe(
      false,
    );
    expect(
      await other.semaphore.extend({ storeKey: storeKey("sec", "semaphore", "owned"), token: "guessed-token", leaseMs: 60_000 }),
    ).toBe(false);
    expect(await other.lock.release({ storeKey: storeKey("seclock", "lock", "owned"), token: "guessed-token" })).toBe(false);
    expect(
      await other.lock.extend({ storeKey: storeKey("seclock", "lock", "owned"), token: "guessed-token", leaseMs: 60_000 }),
    ).toBe(false);
    expect(await mine?.release()).toBe(true);
    expect(await held?.release()).toBe(true);
    (other.client as Redis).disconnect();

    // 100,000 tenants that came once: their keys expire with their leases, nothing is left behind.
    const tenants = semaphore(own.redis, { limit: 2, prefix: "tenant" });
    const batch = 2_000;
    let admitted = 0;
    for (let start = 0; start < 100_000; start += batch) {
      const leases = await Promise.all(
        Array.from({ length: batch }, (_, n) => tenants.acquire(`t${start + n}`, { leaseMs: 3_000 })),
      );
      admitted += leases.filter((lease) => lease !== null).length;
    }
    expect(admitted).toBe(100_000);
    expect(await own.redis.dbsize()).toBeGreaterThan(0);
    await eventually(async () => (await own.redis.dbsize()) === 0, 30_000, 250);
    report({
      scenario: "14. security",
      operations: 110_000,
      maxHolders: "-",
      declaredLosses: 0,
      leaks: await own.redis.dbsize(),
      verdict: "pass",
      notes: "10,000 unique 128-bit tokens; 100,000 tenants left 0 keys",
    });
  });
});
