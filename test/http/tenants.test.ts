import { subscribe, unsubscribe } from "node:diagnostics_channel";
import request from "supertest";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lock as expressLock, semaphore as expressSemaphore } from "../../integrations/express/index.js";
import { semaphore as honoSemaphore } from "../../integrations/hono/index.js";
import { Lock, Semaphore } from "../../integrations/nestjs/index.js";
import { CHANNELS, type HttpRejectedEvent, semaphore, ValidationError } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { eventually, spyStore } from "../support/stores.js";
import { bothStores, harnesses } from "./frameworks.js";
import { Control, type RunningApp } from "./harness.js";

const PROBLEM_FIELDS = ["detail", "key", "limit", "retryAfter", "status", "title", "type"];

describe.each(harnesses)("$name adapter with tenants", (harness) => {
  describe.each(bothStores)("on the $name store", ({ make }) => {
    let store: Store;
    let calls: ReturnType<typeof spyStore>["calls"];
    let control: Control;
    let app: RunningApp;
    let refused: HttpRejectedEvent[];
    const onRefused = (event: unknown) => refused.push(event as HttpRejectedEvent);
    const stats = (id: string, tenant?: string) => {
      const slots = semaphore({ client: store, limit: 3 });
      return tenant === undefined ? slots.stats(id) : slots.stats(id, { tenant, tenantLimit: 1 });
    };
    const get = (path: string, headers: Record<string, string>) => {
      let pending = request(app.url).get(path);
      for (const [name, value] of Object.entries(headers)) pending = pending.set(name, value);
      return pending;
    };
    /** A request the test lets finish with control.open(id); sent at once. */
    const held = (path: string, tenant: string, id: string) => get(path, { "x-tenant": tenant, "x-id": id }).then((res) => res);
    /** Every permit of `id` returned: none used, none waiting, and one release per lease taken. */
    const nothingHeld = async (id: string, tenants: string[]) => {
      await eventually(async () => (await stats(id)).used === 0);
      expect(await stats(id)).toMatchObject({ used: 0, waiting: 0, tenants: 0 });
      for (const tenant of tenants) expect(await stats(id, tenant)).toMatchObject({ used: 0, waiting: 0 });
    };

    beforeEach(async () => {
      const spied = spyStore(make(), {}, 2_000);
      store = spied.store;
      calls = spied.calls;
      control = new Control(store);
      refused = [];
      subscribe(CHANNELS.httpRejected, onRefused);
      app = await harness.start(store, control);
    });

    afterEach(async () => {
      unsubscribe(CHANNELS.httpRejected, onRefused);
      control.openAll();
      await app.close();
    });

    it("a tenant at its cap gets 429 tenant-full with its own figures only, while other tenants are still admitted", async () => {
      const acme = [held("/tenants", "acme", "a1"), held("/tenants", "acme", "a2")];
      await eventually(() => control.entered.length === 2);
      const capped = await get("/tenants", { "x-tenant": "acme" });
      expect(capped.status).toBe(429);
      expect(capped.headers["content-type"]).toMatch(/^application\/problem\+json/);
      expect(capped.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      const problem = JSON.parse(capped.text);
      expect(problem).toEqual({
        type: "urn:leasehold:problem:tenant-full",
        title: expect.any(String),
        status: 429,
        detail: expect.stringContaining('tenant "acme"'),
        key: "tenants",
        limit: 2,
        tenant: "acme",
        retryAfter: Number(capped.headers["retry-after"]),
      });

      // Globex still has room, though acme is at its cap: admitted, and the id is now full (3).
      const globex = held("/tenants", "globex", "g1");
      await eventually(() => control.entered.includes("g1"));
      const full = await get("/tenants", { "x-tenant": "initech" });
      expect(full.status).toBe(503);
      expect(full.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      const fullProblem = JSON.parse(full.text);
      expect(fullProblem).toMatchObject({ type: "urn:leasehold:problem:semaphore-full", status: 503, key: "tenants", limit: 3 });
      expect(Object.keys(fullProblem).sort()).toEqual(PROBLEM_FIELDS);
      // At its cap and with the id full: its own cap is what acme hears of.
      const both = await get("/tenants", { "x-tenant": "acme" });
      expect(both.status).toBe(429);
      expect(JSON.parse(both.text)).toMatchObject({ type: "urn:leasehold:problem:tenant-full", limit: 2 });
      // Nobody hears of another tenant: neither its name nor its figures.
      for (const res of [capped, full, both]) expect(res.text).not.toMatch(/globex|initech/);
      expect(capped.text).not.toMatch(/\b3\b/);

      expect(await stats("tenants")).toMatchObject({ used: 3, tenants: 2 });
      expect(await stats("tenants", "acme")).toMatchObject({ used: 2 });
      // The diagnostics event names the route, and carries the tenant apart, for exporters that ask.
      expect(refused.map(({ name, reason, status, tenant }) => ({ name, reason, status, tenant }))).toEqual([
        { name: "tenants", reason: "tenant-full", status: 429, tenant: "acme" },
        { name: "tenants", reason: "full", status: 503, tenant: "initech" },
        { name: "tenants", reason: "tenant-full", status: 429, tenant: "acme" },
      ]);

      control.openAll();
      const answers = await Promise.all([...acme, globex]);
      expect(answers.map((res) => res.body.tenant)).toEqual(["acme", "acme", "globex"]);
      for (const res of answers) {
        expect(res.body).toMatchObject({ key: "tenants", limit: 3 });
        expect(res.headers["lease-fence"]).toBe(String(res.body.fence));
      }
      await nothingHeld("tenants", ["acme", "globex"]);
      expect(calls.semaphoreRelease).toBe(3);
    });

    it("status overrides both refusals: a tenant at its cap and a full id", async () => {
      const first = held("/tenants-status", "acme", "a1");
      await eventually(() => control.entered.includes("a1"));
      const capped = await get("/tenants-status", { "x-tenant": "acme" });
      expect(capped.status).toBe(503);
      expect(capped.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      expect(JSON.parse(capped.text)).toMatchObject({ type: "urn:leasehold:problem:tenant-full", status: 503, limit: 1 });
      const second = held("/tenants-status", "globex", "g1");
      await eventually(() => control.entered.includes("g1"));
      const full = await get("/tenants-status", { "x-tenant": "initech" });
      expect(full.status).toBe(503);
      expect(JSON.parse(full.text)).toMatchObject({ type: "urn:leasehold:problem:semaphore-full", status: 503, limit: 2 });
      control.openAll();
      expect((await first).status).toBe(200);
      expect((await second).status).toBe(200);
      await nothingHeld("tenants-status", ["acme", "globex"]);
    });

    it("tenantLimit may be a function of the tenant; a bad tenant or cap is a ValidationError on the error path, and takes nothing", async () => {
      const premium = [held("/tenants-premium", "premium", "p1"), held("/tenants-premium", "premium", "p2")];
      const basic = held("/tenants-premium", "basic", "b1");
      await eventually(() => control.entered.length === 3);
      const premiumCapped = await get("/tenants-premium", { "x-tenant": "premium" });
      const basicCapped = await get("/tenants-premium", { "x-tenant": "basic" });
      expect([premiumCapped.status, basicCapped.status]).toEqual([429, 429]);
      expect(JSON.parse(premiumCapped.text)).toMatchObject({ tenant: "premium", limit: 2 });
      expect(JSON.parse(basicCapped.text)).toMatchObject({ tenant: "basic", limit: 1 });
      control.openAll();
      await Promise.all([...premium, basic]);
      await nothingHeld("premium", ["premium", "basic"]);

      const acquires = calls.semaphoreAcquire;
      const greedy = await get("/tenants-premium", { "x-tenant": "greedy" });
      expect(greedy.status).toBe(500);
      expect(greedy.body).toMatchObject({ error: "ValidationError" });
      expect(greedy.body.message).toMatch(
        /tenantLimit function of "premium" returned 4 for tenant "greedy".*from 1 to the limit \(3\)/,
      );
      const broken = await get("/tenants-premium", { "x-tenant": "broken" });
      expect(broken.status).toBe(500);
      expect(broken.body.message).toMatch(/returned 0 for tenant "broken"/);
      const anonymous = await get("/tenants-premium", {});
      expect(anonymous.status).toBe(500);
      expect(anonymous.body.message).toMatch(/tenant function of "premium" returned an empty string/);
      const unprintable = await get("/tenants-premium", { "x-tenant": "a".repeat(300) });
      expect(unprintable.status).toBe(500);
      expect(unprintable.body.message).toMatch(/tenant function of "premium" returned an unusable value/);
      // Refused before any slot was taken: nothing to release, nothing held.
      expect(calls.semaphoreAcquire).toBe(acquires);
      await nothingHeld("premium", ["greedy", "broken"]);
    });

    it("a request whose tenant function finds none is answered 400 tenant-missing, with nothing taken", async () => {
      const acquires = calls.semaphoreAcquire;
      const missing = await get("/tenants-optional", {});
      expect(missing.status).toBe(400);
      expect(missing.headers["retry-after"]).toBeUndefined();
      const problem = JSON.parse(missing.text);
      expect(problem).toMatchObject({ type: "urn:leasehold:problem:tenant-missing", status: 400, key: "optional" });
      expect(problem.detail).toMatch(/names no tenant.*skip\(\)/);
      expect(calls.semaphoreAcquire).toBe(acquires);
      expect(refused).toContainEqual(expect.objectContaining({ name: "optional", reason: "tenant-missing", status: 400 }));
      // With the tenant, the same route admits.
      const named = held("/tenants-optional", "acme", "o1");
      await eventually(() => control.entered.length === 1);
      control.openAll();
      expect((await named).status).toBe(200);
      await nothingHeld("optional", ["acme"]);
    });

    it("fair waiting: a heavy tenant's queued requests do not starve a light tenant's one request", async () => {
      const first = held("/tenants-queue", "heavy", "h1");
      await eventually(() => control.entered.includes("h1"));
      const answers = [first];
      const queue = async (tenant: string, id: string) => {
        const before = (await stats("tenants-queue")).waiting;
        answers.push(held("/tenants-queue", tenant, id));
        await eventually(async () => (await stats("tenants-queue")).waiting === before + 1);
      };
      for (const id of ["h2", "h3", "h4"]) await queue("heavy", id);
      await queue("light", "l1");
      // One at a time: each admitted request is let finish once it is in.
      const admitted: string[] = [];
      for (let n = 0; n < 4; n++) {
        const current = control.entered.at(-1) as string;
        control.open(current);
        await eventually(() => control.entered.length === n + 2);
        admitted.push(control.entered.at(-1) as string);
      }
      control.open(control.entered.at(-1) as string);
      expect((await Promise.all(answers)).map((res) => res.status)).toEqual([200, 200, 200, 200, 200]);
      // First come, first served would have made l1 wait behind h2, h3 and h4.
      expect(admitted.indexOf("l1")).toBeLessThan(admitted.indexOf("h3"));
      expect(admitted.indexOf("l1")).toBeLessThan(admitted.indexOf("h4"));
      expect(admitted.filter((id) => id.startsWith("h"))).toEqual(["h2", "h3", "h4"]);
      await nothingHeld("tenants-queue", ["heavy", "light"]);
    });
  });
});

describe("tenant options are validated when the middleware is created", () => {
  const tenant = () => "acme";
  const cases: [string, () => unknown, string, RegExp][] = [
    ["Express tenantLimit without tenant", () => expressSemaphore("x", 5, { tenantLimit: 2 }), "tenant", /without `tenant`/],
    ["Hono tenantMaxQueue without tenant", () => honoSemaphore("x", 5, { tenantMaxQueue: 2 }), "tenant", /without `tenant`/],
    ["NestJS tenant without tenantLimit", () => Semaphore("x", 5, { tenant }), "tenantLimit", /needs `tenantLimit`/],
    [
      "Express tenantLimit above the limit",
      () => expressSemaphore("x", 5, { tenant, tenantLimit: 6 }),
      "tenantLimit",
      /`tenantLimit` 6 is above the limit 5/,
    ],
    ["Hono tenantLimit 0", () => honoSemaphore("x", 5, { tenant, tenantLimit: 0 }), "tenantLimit", /at least 1/],
    ["NestJS tenantLimit 1.5", () => Semaphore("x", 5, { tenant, tenantLimit: 1.5 }), "tenantLimit", /at least 1/],
    [
      "Express tenant a string",
      () => expressSemaphore("x", 5, { tenant: "acme" as never, tenantLimit: 2 }),
      "tenant",
      /function/,
    ],
    [
      "Hono weight above tenantLimit",
      () => honoSemaphore("x", 5, { tenant, tenantLimit: 2, weight: 3 }),
      "weight",
      /above `tenantLimit` 2/,
    ],
    [
      "NestJS tenantMaxQueue 0",
      () => Semaphore("x", 5, { tenant, tenantLimit: 2, tenantMaxQueue: 0 }),
      "tenantMaxQueue",
      /at least 1/,
    ],
  ];
  it.each(cases)("%s", (_, create, option, message) => {
    let thrown: unknown;
    try {
      create();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect(thrown).toMatchObject({ option });
    expect((thrown as Error).message).toMatch(message);
  });

  it("tenant options on a lock are unknown options", () => {
    expect(() => expressLock("x", { tenant } as never)).toThrow(/unknown option `tenant` for lock middleware/);
    expect(() => Lock("x", { tenantLimit: 2 } as never)).toThrow(/unknown option `tenantLimit`/);
  });
});
