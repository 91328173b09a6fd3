// `middleware.wrap(handler)` with a handler that answers at once, on Node: Hono's single-handler path and
// @hono/node-server's fast path. The permit is held until the response is written and given back once.
import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { Hono } from "hono";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore as honoSemaphore, type LeaseholdVariables, type SemaphoreLease } from "../../../integrations/hono/index.js";
import { memoryStore, semaphore } from "../../../src/index.js";
import { eventually, spyStore } from "../../support/stores.js";
import { listen, type RunningApp } from "../harness.js";

describe("Hono: a guarded handler that answers at once", () => {
  let running: RunningApp | undefined;
  afterEach(async () => {
    await running?.close();
  });

  it("is served on the fast path, holds its permit until written, gives it back once, and refuses with 503 + Retry-After", async () => {
    const { store, calls } = spyStore(memoryStore());
    // A handler guarded by `wrap` reads the lease through the app's declared variables, as after `app.use`.
    const app = new Hono<{ Variables: LeaseholdVariables<SemaphoreLease> }>();
    const guard = honoSemaphore("sync", 1, { client: store, exposeFence: true });
    let seen: unknown;
    app.get(
      "/",
      guard.wrap((c) => {
        seen = c.get("lease");
        return c.json({ ok: true });
      }),
    );
    running = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    for (let i = 0; i < 3; i++) {
      const res = await request(running.url).get("/");
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ok: true });
      expect(res.headers["lease-fence"]).toMatch(/^\d+$/);
    }
    expect(seen).toBeDefined();
    expect(calls.semaphoreAcquire).toBe(3);
    expect(calls.semaphoreRelease).toBe(3);

    const held = await semaphore({ client: store, limit: 1 }).acquire("sync");
    const refused = await request(running.url).get("/");
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toMatch(/^\d+$/);
    expect(refused.headers["content-type"]).toContain("application/problem+json");
    await held?.release();
    expect((await request(running.url).get("/")).status).toBe(200);
    expect(await semaphore({ client: store, limit: 1 }).count("sync")).toBe(0);
  });

  it("behind other middleware, a handler that sets c.res and returns nothing is answered with it, off Node as on it, and its permit returns", async () => {
    const store = memoryStore();
    const app = new Hono();
    app.use(async (_c, next) => {
      await next();
    });
    app.get(
      "/",
      honoSemaphore("sets", 1, { client: store }).wrap(async (c) => {
        await Promise.resolve();
        c.res = c.text("set on the context");
      }),
    );
    for (let i = 0; i < 2; i++) {
      const res = await app.request("/");
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("set on the context");
    }
    running = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    const res = await request(running.url).get("/");
    expect(res.text).toBe("set on the context");
    await eventually(async () => (await semaphore({ client: store, limit: 1 }).count("sets")) === 0);
  });
});
