import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { type Context, type Handler, Hono, type MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { stream } from "hono/streaming";
import { type LeaseholdMiddleware, lock, semaphore } from "../../integrations/hono/index.js";
import type { RequestLease } from "../../integrations/http/types.js";
import type { Store } from "../../src/store/index.js";
import { type Control, type Harness, listen } from "./harness.js";

const tenant = (c: Context) => c.req.header("x-tenant") ?? "";
const id = (c: Context) => c.req.header("x-id") ?? "anonymous";
const leaseOf = (c: Context) => c.get("lease") as RequestLease | undefined;

/**
 * The same routes as express-app.ts, written the Hono way: leasehold's middleware before each
 * handler, or (`wrapped`) the same guard as one handler, `middleware.wrap(handler)`.
 */
export function buildHonoApp(store: Store, control: Control, wrapped = false): Hono {
  const app = new Hono();
  // Every route's last two handlers are leasehold's middleware and the route's handler.
  const route = (method: "get" | "post", path: string, ...handlers: (MiddlewareHandler | Handler)[]) => {
    const [guard, handler] = handlers.slice(-2) as [LeaseholdMiddleware, Handler];
    const chain = wrapped ? [...handlers.slice(0, -2), guard.wrap(handler)] : handlers;
    (app[method] as (path: string, ...handlers: (MiddlewareHandler | Handler)[]) => Hono)(path, ...chain);
  };
  const client = store;
  const hold = async (c: Context) => {
    const lease = leaseOf(c);
    control.watch(id(c), lease);
    await control.hold(id(c));
    return c.json({ key: lease?.key, limit: lease && "limit" in lease ? lease.limit : null });
  };
  const onLeaseLost = (error: unknown, c: Context) => control.reasons.set(`hook:${c.req.path.slice(1)}`, error);
  route("get", "/work", semaphore("work", 2, { client, key: tenant }), hold);
  route("get", "/work-too", semaphore("work", 2, { client, key: tenant }), hold);
  route("post", "/orders/:id", lock("order", { client, key: (c) => c.req.param("id") ?? "" }), hold);
  route("get", "/quota", semaphore("quota", 1, { client, status: 429 }), hold);
  route(
    "get",
    "/custom",
    semaphore("custom", 1, {
      client,
      onRejected: (c, rejection) => c.json({ custom: "refusal", retryAfter: rejection.retryAfter }, 418),
    }),
    hold,
  );
  route("get", "/stream", semaphore("stream", 1, { client }), (c) => {
    const lease = leaseOf(c);
    control.watch(id(c), lease);
    return stream(c, async (body) => {
      await body.write("first\n");
      await control.hold(id(c));
      await body.write("second\n");
    });
  });
  route("get", "/throw", semaphore("throw", 1, { client }), () => {
    throw new Error("handler failed");
  });
  route("get", "/reject", semaphore("reject", 1, { client }), async () => {
    await Promise.resolve();
    throw new Error("handler rejected");
  });
  route("get", "/lose", semaphore("lose", 1, { client, heartbeatMs: 20, onLeaseLost }), async (c) => {
    const lease = leaseOf(c)!;
    control.watch(id(c), lease);
    await control.steal(lease);
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
    return c.text("too late");
  });
  route("get", "/lose-stream", semaphore("lose-stream", 1, { client, heartbeatMs: 20 }), (c) => {
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
  route("get", "/linger", semaphore("linger", 1, { client, disconnectGraceMs: 60_000, onLeaseLost: recordLoss }), hold);
  route("get", "/abandon", semaphore("abandon", 1, { client, disconnectGraceMs: 200, onLeaseLost: recordLoss }), async (c) => {
    control.watch(id(c), leaseOf(c));
    await control.hold(id(c));
    return c.text("too late");
  });
  route("get", "/early", semaphore("early", 1, { client, leaseMs: 200, heartbeatMs: 50, onLeaseLost: recordLoss }), async (c) => {
    control.watch(id(c), leaseOf(c));
    const released = await leaseOf(c)?.release();
    await control.hold(id(c));
    return c.json({ released });
  });
  // A slow step before leasehold (an auth call, a body parser): the client may leave meanwhile.
  route(
    "get",
    "/late",
    async (c, next) => {
      await control.hold(`before:${id(c)}`);
      await next();
    },
    semaphore("late", 1, { client }),
    hold,
  );
  route("get", "/empty-key", semaphore("ek", 1, { client, key: () => "" }), hold);
  route(
    "get",
    "/throwing-key",
    semaphore("tk", 1, {
      client,
      key: () => {
        throw new Error("no tenant header");
      },
    }),
    hold,
  );
  route("get", "/skip", semaphore("skip", 1, { client, skip: (c) => c.req.header("x-skip") === "1" }), hold);
  route(
    "get",
    "/tenant-limit",
    semaphore("tl", (c) => (tenant(c) === "big" ? 2 : 1), { client, key: tenant }),
    hold,
  );
  route("get", "/queue", semaphore("queue", 1, { client, waitMs: 10_000, maxQueue: 1 }), async (c) => {
    control.watch(id(c), leaseOf(c));
    await control.hold(id(c));
    return c.json({ waitedMs: leaseOf(c)?.waitedMs });
  });
  route("get", "/spin", semaphore("spin", 1, { client, retries: 200, retryDelayMs: 10 }), hold);
  const onStoreUnavailable = (error: unknown) => control.reasons.set("store", error);
  route("get", "/open", semaphore("open", 1, { client, onStoreError: "fail-open", onStoreUnavailable }), (c) =>
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
  route("get", "/tenants", semaphore("tenants", 3, { client, tenant, tenantLimit: 2, exposeFence: true }), view);
  route("get", "/tenants-premium", semaphore("premium", 3, { client, tenant, tenantLimit: (t) => caps[t] ?? 1 }), view);
  route("get", "/tenants-status", semaphore("tenants-status", 2, { client, tenant, tenantLimit: 1, status: 503 }), view);
  route(
    "get",
    "/tenants-optional",
    semaphore("optional", 2, { client, tenant: (c) => c.req.header("x-tenant"), tenantLimit: 1 }),
    view,
  );
  route("get", "/tenants-queue", semaphore("tenants-queue", 1, { client, tenant, tenantLimit: 1, waitMs: 10_000 }), view);
  route("get", "/fenced", semaphore("fenced", 2, { client, exposeFence: true }), view);
  route("get", "/fenced-lock", lock("fenced-lock", { client, exposeFence: true }), view);
  route("get", "/unfenced", semaphore("unfenced", 2, { client }), view);
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

/** The same routes, each guarded as one handler (`middleware.wrap(handler)`). */
export const honoWrappedHarness: Harness = {
  name: "Hono (wrap)",
  start(store, control) {
    const app = buildHonoApp(store, control, true);
    return listen(createAdaptorServer({ fetch: app.fetch }) as Server);
  },
};
