import { setMaxListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { lock, type SemaphoreLease, SemaphoreNotAcquiredError, semaphore, ValidationError } from "../../../src/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("fair tenant shares on the $name store", ({ make, redis }) => {
  const setup = (options: Record<string, unknown> = {}) => {
    const prefix = uniquePrefix();
    const slots = semaphore({ client: make(), limit: 4, tenantLimit: 2, prefix, ...options } as never);
    return { slots, prefix };
  };

  it("one lease counts against the id's limit and its tenant's; a refusal says which bound was hit", async () => {
    const { slots } = setup();
    const a1 = await slots.acquire("openai", { tenant: "acme" });
    const a2 = await slots.acquire("openai", { tenant: "acme" });
    expect(a1).toMatchObject({ tenant: "acme", limit: 4, weight: 1 });
    // Acme is at its cap; the id still has room: acme is refused as "tenant-full", globex is admitted.
    const refused = await slots.run("openai", async () => "no", { tenant: "acme" }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect(refused).toMatchObject({ reason: "tenant-full", tenant: "acme", tenantLimit: 2, key: "openai", limit: 4 });
    expect((refused as SemaphoreNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
    const g1 = await slots.acquire("openai", { tenant: "globex" });
    const g2 = await slots.acquire("openai", { tenant: "globex" });
    expect([g1, g2].every((lease) => lease !== null)).toBe(true);
    // Now the id is full too: a caller of a tenant with room gets "full"; one at its cap still "tenant-full".
    const initech = await slots.run("openai", async () => "no", { tenant: "initech" }).catch((e: unknown) => e);
    expect(initech).toMatchObject({ reason: "full", tenant: "initech" });
    const both = await slots.run("openai", async () => "no", { tenant: "acme" }).catch((e: unknown) => e);
    expect(both).toMatchObject({ reason: "tenant-full" });
    expect(await slots.stats("openai")).toMatchObject({ used: 4, holders: 4, tenants: 2 });
    expect(await slots.stats("openai", { tenant: "acme" })).toEqual({
      tenant: "acme",
      limit: 2,
      used: 2,
      waiting: 0,
      available: 0,
    });
    for (const lease of [a1, a2, g1, g2]) await lease?.release();
    expect(await slots.stats("openai", { tenant: "acme" })).toEqual({
      tenant: "acme",
      limit: 2,
      used: 0,
      waiting: 0,
      available: 2,
    });
  });

  it("weights count against both bounds; callers without a tenant count against the id only", async () => {
    const { slots } = setup({ limit: 5, tenantLimit: 3 });
    const heavy = await slots.acquire("k", { tenant: "acme", weight: 3 });
    expect(heavy).toMatchObject({ weight: 3, tenant: "acme" });
    expect(await slots.acquire("k", { tenant: "acme" })).toBeNull();
    const plain = await slots.acquire("k", { weight: 2 });
    expect(plain).toMatchObject({ weight: 2, tenant: undefined });
    expect(await slots.acquire("k", { tenant: "globex" })).toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: 5, holders: 2, tenants: 1 });
    await heavy?.release();
    const globex = await slots.acquire("k", { tenant: "globex", weight: 3 });
    expect(globex).not.toBeNull();
    await globex?.release();
    await plain?.release();
  });

  it("tenantLimit may be a function of the tenant, and a call may pass its own", async () => {
    const premium = new Set(["acme"]);
    const { slots } = setup({ limit: 10, tenantLimit: (tenant: string) => (premium.has(tenant) ? 4 : 1) });
    const acme = await Promise.all(Array.from({ length: 5 }, () => slots.acquire("k", { tenant: "acme" })));
    expect(acme.filter(Boolean)).toHaveLength(4);
    expect(await slots.acquire("k", { tenant: "globex" })).not.toBeNull();
    expect(await slots.acquire("k", { tenant: "globex" })).toBeNull();
    expect(await slots.acquire("k", { tenant: "globex", tenantLimit: 2 })).not.toBeNull();
    expect(await slots.stats("k", { tenant: "globex" })).toMatchObject({ limit: 1, used: 2 });
    expect(await slots.stats("k", { tenant: "globex", tenantLimit: 3 })).toMatchObject({ limit: 3, used: 2, available: 1 });
  });

  // issue #27, defect 8: a call's tenantLimit, like the semaphore's, may be a function of the tenant.
  it("a call's tenantLimit may be a function of the tenant, for acquire, run and stats alike", async () => {
    const { slots } = setup({ limit: 10, tenantLimit: 1 });
    const premium = (tenant: string) => (tenant === "acme" ? 3 : 1);
    const asked: string[] = [];
    const cap = (tenant: string) => {
      asked.push(tenant);
      return premium(tenant);
    };
    const acme = await Promise.all(Array.from({ length: 4 }, () => slots.acquire("k", { tenant: "acme", tenantLimit: cap })));
    expect(acme.filter(Boolean)).toHaveLength(3);
    expect(acme[0]).toMatchObject({ tenant: "acme" });
    expect(asked).toContain("acme");
    const ran = await slots.run("k", async () => "ran", { tenant: "globex", tenantLimit: cap });
    expect(ran).toBe("ran");
    const refused = await slots.run("k", async () => "no", { tenant: "acme", tenantLimit: cap }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ reason: "tenant-full", tenant: "acme", tenantLimit: 3 });
    expect(await slots.stats("k", { tenant: "acme", tenantLimit: cap })).toMatchObject({ limit: 3, used: 3, available: 0 });
    for (const lease of acme) await lease?.release();
  });

  it("a tenantLimit function's answer is checked before any permit is taken: a whole number from 1 to the limit", async () => {
    const { slots } = setup();
    const answers: [unknown, RegExp][] = [
      [0, /returned 0 for tenant "acme"/],
      [1.5, /returned 1\.5 for tenant "acme"/],
      ["3", /returned "3" for tenant "acme"/],
      [undefined, /returned undefined for tenant "acme"/],
      [5, /returned 5 for tenant "acme".*above the id's limit 4/],
    ];
    for (const [answer, message] of answers) {
      const tenantLimit = (() => answer) as unknown as (tenant: string) => number;
      for (const call of [
        () => slots.acquire("k", { tenant: "acme", tenantLimit }),
        () => slots.run("k", async () => "ran", { tenant: "acme", tenantLimit }),
      ]) {
        const error = await call().catch((e: unknown) => e);
        expect(error, String(answer)).toBeInstanceOf(ValidationError);
        expect(error).toMatchObject({ option: "tenantLimit" });
        expect((error as Error).message).toMatch(message);
        expect((error as Error).message).toMatch(/tenantLimit/);
      }
    }
    const throwing = () => {
      throw new Error("no such plan");
    };
    const error = await slots.acquire("k", { tenant: "acme", tenantLimit: throwing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(/tenantLimit function threw for tenant "acme": no such plan/);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0, waiting: 0 });
  });

  it("bad tenant options are refused before any permit is taken, naming the option", async () => {
    const { slots, prefix } = setup();
    const plain = semaphore({ client: make(), limit: 4, prefix });
    const cases: [() => Promise<unknown>, string, RegExp][] = [
      [() => plain.acquire("k", { tenant: "acme" }), "tenantLimit", /has no tenantLimit/],
      [() => plain.acquire("k", { tenantLimit: 2 }), "tenant", /without a `tenant`/],
      [() => slots.acquire("k", { tenantMaxQueue: 2 }), "tenant", /without a `tenant`/],
      [() => slots.acquire("k", { tenant: "acme", tenantLimit: 5 }), "tenantLimit", /above the id's limit 4/],
      [() => slots.acquire("k", { tenant: "acme", weight: 3 }), "weight", /above the tenantLimit 2/],
      [() => slots.acquire("k", { tenant: "" }), "tenant", /non-empty string/],
      [() => slots.acquire("k", { tenant: "a\nb" }), "tenant", /printable/],
      [() => slots.acquire("k", { tenant: "acme", tenantLimit: 0 }), "tenantLimit", /at least 1/],
      [() => slots.acquire("k", { tenant: "acme", tenantMaxQueue: -1 }), "tenantMaxQueue", /at least 1/],
      [() => lock({ client: make(), prefix }).acquire("k", { tenant: "acme" } as never), "tenant", /unknown option `tenant`/],
    ];
    for (const [call, option, message] of cases) {
      const error = await call().catch((e: unknown) => e);
      expect(error, String(message)).toBeInstanceOf(ValidationError);
      expect(error).toMatchObject({ option });
      expect((error as Error).message).toMatch(message);
    }
    expect(() => semaphore({ client: make(), limit: 4, tenantLimit: 5 })).toThrow(/above the id's limit 4/);
    expect(() => semaphore({ client: make(), limit: 4, tenantLimit: 0 })).toThrow(ValidationError);
    expect(await slots.stats("k")).toMatchObject({ used: 0, waiting: 0 });
  });

  it("waiting tenants are served in turn: one tenant's burst does not make another wait behind it", async () => {
    const { slots } = setup({ limit: 1, tenantLimit: 1, waitMs: 30_000 });
    const holder = await slots.acquire("k", { tenant: "acme" });
    const order: string[] = [];
    const runs: Promise<unknown>[] = [];
    const join = async (tenant: string, n: number) => {
      const before = (await slots.stats("k")).waiting;
      runs.push(
        slots.run(
          "k",
          async () => {
            order.push(`${tenant}${n}`);
          },
          { tenant },
        ),
      );
      await eventually(async () => (await slots.stats("k")).waiting === before + 1);
    };
    for (let n = 1; n <= 6; n++) await join("acme", n);
    await join("globex", 1);
    await join("initech", 1);
    await holder?.release();
    await Promise.all(runs);
    // Acme's first waiter had its turn before the others arrived; then each tenant in turn.
    expect(order.slice(0, 4)).toEqual(["acme1", "globex1", "initech1", "acme2"]);
    expect(order).toHaveLength(8);
  });

  it("tenant A with 1,000 queued requests: B's one is granted before A gets more than one further permit per free slot", async () => {
    const { slots } = setup({ limit: 4, tenantLimit: 4, waitMs: 60_000 });
    // Acme holds every permit, then queues 1,000 more; its cap is the id's limit, so only the queue's turns
    // stand between it and globex.
    const free = (await Promise.all([1, 2, 3, 4].map(() => slots.acquire("k", { tenant: "acme" })))) as SemaphoreLease[];
    const order: string[] = [];
    const abort = new AbortController();
    setMaxListeners(2_000, abort.signal); // one signal for the whole flood
    const flood = Array.from({ length: 1_000 }, () =>
      slots.acquire("k", { tenant: "acme", signal: abort.signal }).then(
        (lease) => {
          order.push("acme");
          free.push(lease as SemaphoreLease);
        },
        () => {},
      ),
    );
    await eventually(async () => (await slots.stats("k")).waiting === 1_000, 30_000);
    for (let round = 0; round < 3; round++) {
      let globex: SemaphoreLease | undefined;
      const arriving = slots.acquire("k", { tenant: "globex" }).then((lease) => {
        order.push("globex");
        globex = lease as SemaphoreLease;
      });
      await eventually(async () => (await slots.stats("k", { tenant: "globex" })).waiting === 1);
      // Free one permit at a time; each is granted to one of them.
      const before = order.length;
      let freed = 0;
      while (globex === undefined) {
        await (free.shift() as SemaphoreLease).release();
        freed++;
        await eventually(() => order.length === before + freed);
        expect(freed, `round ${round}: ${order.slice(before).join(" ")}`).toBeLessThanOrEqual(2);
      }
      await arriving;
      expect(order.slice(before, -1).every((tenant) => tenant === "acme")).toBe(true);
      expect(order.length - 1 - before, "acme's further permits before globex's").toBeLessThanOrEqual(1);
      await (globex as SemaphoreLease).release();
      await eventually(() => order.length === before + freed + 1); // acme has the permit globex gave back
    }
    expect(await slots.stats("k", { tenant: "acme" })).toMatchObject({
      used: 4,
      waiting: 1_000 - order.filter((t) => t === "acme").length,
    });
    abort.abort();
    await Promise.all(flood);
    for (const lease of free) await lease.release();
    expect(await slots.stats("k")).toMatchObject({ used: 0, waiting: 0 });
  });

  it("a tenant waiting at its cap is served as soon as its first waiter leaves and the next one fits", async () => {
    const { slots } = setup({ limit: 10, tenantLimit: 3, waitMs: 30_000 });
    const held = [await slots.acquire("k", { tenant: "acme" }), await slots.acquire("k", { tenant: "acme" })];
    // Acme's first waiter needs 2 permits (2 + 2 > its cap of 3); the one behind it needs 1, and waits its turn.
    const abort = new AbortController();
    const heavy = slots.acquire("k", { tenant: "acme", weight: 2, signal: abort.signal }).catch((e: unknown) => e);
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    let light: SemaphoreLease | null | undefined;
    const lightWait = slots.acquire("k", { tenant: "acme" }).then((lease) => {
      light = lease;
    });
    await eventually(async () => (await slots.stats("k")).waiting === 2);
    expect(light).toBeUndefined();
    // The first leaves: nothing was released, yet the next one fits acme's cap now.
    abort.abort();
    await heavy;
    await eventually(() => light !== undefined);
    await lightWait;
    expect(light).toMatchObject({ tenant: "acme", weight: 1 });
    expect(await slots.stats("k", { tenant: "acme" })).toMatchObject({ used: 3, waiting: 0 });
    for (const lease of [...held, light]) await lease?.release();
  });

  it("a tenant at its cap never holds back other tenants", async () => {
    const { slots } = setup({ limit: 4, tenantLimit: 2, waitMs: 30_000 });
    const acme = [await slots.acquire("k", { tenant: "acme" }), await slots.acquire("k", { tenant: "acme" })];
    // Acme waits (at its cap) while the id has two free permits.
    const acmeWaiting = slots.acquire("k", { tenant: "acme" });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    const globex = await slots.acquire("k", { tenant: "globex" });
    const failFast = await slots.acquire("k", { tenant: "initech", waitMs: 0 });
    expect(globex).not.toBeNull();
    expect(failFast).not.toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: 4, waiting: 1 });
    await acme[0]?.release();
    const third = (await acmeWaiting) as SemaphoreLease;
    expect(third.tenant).toBe("acme");
    for (const lease of [acme[1], globex, failFast, third]) await lease?.release();
  });

  it("maxQueue bounds the id's queue, tenantMaxQueue each tenant's share of it", async () => {
    const { slots } = setup({ limit: 1, tenantLimit: 1, waitMs: 30_000, maxQueue: 3, tenantMaxQueue: 2 });
    const holder = await slots.acquire("k", { tenant: "acme" });
    const waits = [slots.acquire("k", { tenant: "acme" }), slots.acquire("k", { tenant: "acme" })];
    await eventually(async () => (await slots.stats("k")).waiting === 2);
    const third = await slots.run("k", async () => 1, { tenant: "acme" }).catch((e: unknown) => e);
    expect(third).toMatchObject({ reason: "queue-full", tenant: "acme" });
    const other = slots.acquire("k", { tenant: "globex" });
    await eventually(async () => (await slots.stats("k")).waiting === 3);
    const overflow = await slots.run("k", async () => 1, { tenant: "initech" }).catch((e: unknown) => e);
    expect(overflow).toMatchObject({ reason: "queue-full" });
    expect(await slots.stats("k", { tenant: "acme" })).toMatchObject({ waiting: 2 });
    await holder?.release();
    // Each waiter gives its permit back as soon as it has it, so that the next can have its turn.
    await Promise.all([...waits, other].map((pending) => pending.then((lease) => lease?.release())));
  });

  it("a tenant's crashed holder is reclaimed after its lease, and an idle id leaves nothing behind", async () => {
    const { slots, prefix } = setup({ limit: 4, tenantLimit: 1 });
    await slots.acquire("k", { tenant: "acme", leaseMs: 150 }); // crashes
    expect(await slots.acquire("k", { tenant: "acme" })).toBeNull();
    await eventually(async () => (await slots.stats("k", { tenant: "acme" })).used === 0);
    const next = await slots.acquire("k", { tenant: "acme", leaseMs: 150 });
    expect(next).not.toBeNull();
    await next?.release();
    if (redis !== undefined) await eventually(async () => (await redis().keys(`*${prefix}*`)).length === 0);
    expect(await slots.stats("k")).toMatchObject({ used: 0, tenants: 0 });
  });
});
