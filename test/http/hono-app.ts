import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { stream } from "hono/streaming";
import { lock, semaphore } from "../../integrations/hono/index.js";
import type { RequestLease } from "../../src/http/exchange.js";
import type { Store } from "../../src/index.js";
import { type Control, type Harness, listen } from "./harness.js";

const tenant = (c: Context) => c.req.header("x-tenant") ?? "";
const id = (c: Context) => c.req.header("x-id") ?? "anonymous";
const leaseOf = (c: Context) => c.get("lease") as RequestLease | undefined;

/** The same routes as express-app.ts, written the Hono way. */
export function buildHonoApp(store: Store, control: Control): Hono {
  const app = new Hono();
  const client = store;
  const hold = async (c: Context) => {
    const lease = leaseOf(c);
    control.watch(id(c), lease);
    await control.hold(id(c));
    return c.json({ key: lease?.key, limit: lease && "limit" in lease ? lease.limit : null });
  };
  const onLeaseLost = (error: unknown, c: Context) => control.reasons.set(`hook:${c.req.path.slice(1)}`, error);
  app.get("/work", semaphore("work", 2, { client, key: tenant }), hold);
  app.get("/work-too", semaphore("work", 2, { client, key: tenant }), hold);
  app.post("/orders/:id", lock("order", { client, key: (c) => c.req.param("id") ?? "" }), hold);
  app.get("/quota", semaphore("quota", 1, { client, status: 429 }), hold);
  app.get(
    "/custom",
    semaphore("custom", 1, {
      client,
      onRejected: (c, rejection) => c.json({ custom: "refusal", retryAfter: rejection.retryAfter }, 418),
    }),
    hold,
  );
  app.get("/stream", semaphore("stream", 1, { client }), (c) => {
    const lease = leaseOf(c);
    control.watch(id(c), lease);
    return stream(c, async (body) => {
      await body.write("first\n");
      await control.hold(id(c));
      await body.write("second\n");
    });
  });
  app.get("/throw", semaphore("throw", 1, { client }), () => {
    throw new Error("handler failed");
  });
  app.get("/reject", semaphore("reject", 1, { client }), async () => {
    await Promise.resolve();
    throw new Error("handler rejected");
  });
  app.get("/lose", semaphore("lose", 1, { client, heartbeatMs: 20, onLeaseLost }), async (c) => {
    const lease = leaseOf(c)!;
    control.watch(id(c), lease);
    await control.steal(lease);
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
    return c.text("too late");
  });
  app.get("/lose-stream", semaphore("lose-stream", 1, { client, heartbeatMs: 20 }), (c) => {
    const lease = leaseOf(c)!;
    control.watch(id(c), lease);
    return stream(c, async (body) => {
      await body.write("first\n");
      await control.steal(lease);
      await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
    });
  });
  // Disconnects: a handler that keeps working after the abort until the test lets it finish,
  // one that ignores the abort and never ends, and one that gives its permit back early.
  const recordLoss = (error: unknown, c: Context) => control.leaseLost(id(c), error);
  app.get("/linger", semaphore("linger", 1, { client, disconnectGraceMs: 60_000, onLeaseLost: recordLoss }), hold);
  app.get("/abandon", semaphore("abandon", 1, { client, disconnectGraceMs: 200, onLeaseLost: recordLoss }), async (c) => {
    control.watch(id(c), leaseOf(c));
    await control.hold(id(c));
    return c.text("too late");
  });
  app.get("/early", semaphore("early", 1, { client, leaseMs: 200, heartbeatMs: 50, onLeaseLost: recordLoss }), async (c) => {
    control.watch(id(c), leaseOf(c));
    const released = await leaseOf(c)?.release();
    await control.hold(id(c));
    return c.json({ released });
  });
  // A slow step before leasehold (an auth call, a body parser): the client may leave meanwhile.
  app.get(
    "/late",
    async (c, next) => {
      await control.hold(`before:${id(c)}`);
      await next();
    },
    semaphore("late", 1, { client }),
    hold,
  );
  app.get("/empty-key", semaphore("ek", 1, { client, key: () => "" }), hold);
  app.get(
    "/throwing-key",
    semaphore("tk", 1, {
      client,
      key: () => {
        throw new Error("no tenant header");
      },
    }),
    hold,
  );
  app.get("/skip", semaphore("skip", 1, { client, skip: (c) => c.req.header("x-skip") === "1" }), hold);
  app.get(
    "/tenant-limit",
    semaphore("tl", (c) => (tenant(c) === "big" ? 2 : 1), { client, key: tenant }),
    hold,
  );
  app.get("/queue", semaphore("queue", 1, { client, waitMs: 10_000, maxQueue: 1 }), async (c) => {
    control.watch(id(c), leaseOf(c));
    await control.hold(id(c));
    return c.json({ waitedMs: leaseOf(c)?.waitedMs });
  });
  app.get("/spin", semaphore("spin", 1, { client, retries: 200, retryDelayMs: 10 }), hold);
  const onStoreUnavailable = (error: unknown) => control.reasons.set("store", error);
  app.get("/open", semaphore("open", 1, { client, onStoreError: "fail-open", onStoreUnavailable }), (c) =>
    c.json({ lease: leaseOf(c) !== undefined }),
  );
  // Tenants sharing one id (tenants.test.ts), and the fence (fencing.test.ts). The view holds
  // when the request names an x-id, and answers what the handler's lease shows.
  const view = async (c: Context) => {
    const lease = leaseOf(c);
    if (c.req.header("x-id") !== undefined) await control.hold(id(c));
    return c.json({
      key: lease?.key,
      limit: lease && "limit" in lease ? lease.limit : null,
      tenant: lease && "tenant" in lease ? (lease.tenant ?? null) : null,
      fence: lease?.fence,
    });
  };
  const caps: Record<string, number> = { premium: 2, greedy: 4, broken: 0 };
  app.get("/tenants", semaphore("tenants", 3, { client, tenant, tenantLimit: 2, exposeFence: true }), view);
  app.get("/tenants-premium", semaphore("premium", 3, { client, tenant, tenantLimit: (t) => caps[t] ?? 1 }), view);
  app.get("/tenants-status", semaphore("tenants-status", 2, { client, tenant, tenantLimit: 1, status: 503 }), view);
  app.get(
    "/tenants-optional",
    semaphore("optional", 2, { client, tenant: (c) => c.req.header("x-tenant"), tenantLimit: 1 }),
    view,
  );
  app.get("/tenants-queue", semaphore("tenants-queue", 1, { client, tenant, tenantLimit: 1, waitMs: 10_000 }), view);
  app.get("/fenced", semaphore("fenced", 2, { client, exposeFence: true }), view);
  app.get("/fenced-lock", lock("fenced-lock", { client, exposeFence: true }), view);
  app.get("/unfenced", semaphore("unfenced", 2, { client }), view);
  app.onError((error, c) => {
    if (error instanceof HTTPException) return error.getResponse();
    return c.json({ error: error.name, message: error.message }, 500);
  });
  return app;
}

export const honoHarness: Harness = {
  name: "Hono",
  start(store, control) {
    const app = buildHonoApp(store, control);
    return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
  },
};
