import { createServer } from "node:http";
import type { Request, Response } from "express";
import express5 from "express";
import express4 from "express4";
import { lock, semaphore } from "../../integrations/express/index.js";
import type { Store } from "../../src/store/index.js";
import { type Control, type Harness, listen } from "./harness.js";

const tenant = (req: Request) => req.get("x-tenant") ?? "";
const id = (req: Request) => req.get("x-id") ?? "anonymous";

function routes(app: express5.Express, store: Store, control: Control): void {
  const hold = async (req: Request, res: Response) => {
    control.watch(id(req), req.lease);
    await control.hold(id(req));
    if (!res.headersSent) res.json({ key: req.lease?.key, limit: req.lease && "limit" in req.lease ? req.lease.limit : null });
  };
  const client = store;
  app.get("/work", semaphore("work", 2, { client, key: tenant }), hold);
  app.get("/work-too", semaphore("work", 2, { client, key: tenant }), hold);
  app.post("/orders/:id", lock("order", { client, key: (req) => String(req.params.id) }), hold);
  app.get("/quota", semaphore("quota", 1, { client, status: 429 }), hold);
  app.get(
    "/custom",
    semaphore("custom", 1, {
      client,
      onRejected: (_req, res, rejection) => {
        res.status(418).json({ custom: "refusal", retryAfter: rejection.retryAfter });
      },
    }),
    hold,
  );
  app.get("/stream", semaphore("stream", 1, { client }), async (req, res) => {
    control.watch(id(req), req.lease);
    res.write("first\n");
    await control.hold(id(req));
    res.end("second\n");
  });
  app.get("/throw", semaphore("throw", 1, { client }), () => {
    throw new Error("handler failed");
  });
  app.get("/reject", semaphore("reject", 1, { client }), async (_req, _res, next) => {
    await Promise.resolve();
    next(new Error("handler rejected"));
  });
  const onLeaseLost = (error: unknown, req: Request) => control.reasons.set(`hook:${req.path.slice(1)}`, error);
  app.get("/lose", semaphore("lose", 1, { client, heartbeatMs: 20, onLeaseLost }), async (req) => {
    const lease = req.lease!;
    control.watch(id(req), lease);
    await control.steal(lease);
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
  });
  app.get("/lose-stream", semaphore("lose-stream", 1, { client, heartbeatMs: 20 }), async (req, res) => {
    const lease = req.lease!;
    control.watch(id(req), lease);
    res.write("first\n");
    await control.steal(lease);
  });
  // Disconnects: a handler that keeps working after the abort until the test lets it finish,
  // one that ignores the abort and never ends, and one that gives its permit back early.
  const recordLoss = (error: unknown, req: Request) => control.leaseLost(id(req), error);
  app.get("/linger", semaphore("linger", 1, { client, disconnectGraceMs: 60_000, onLeaseLost: recordLoss }), hold);
  app.get("/abandon", semaphore("abandon", 1, { client, disconnectGraceMs: 200, onLeaseLost: recordLoss }), async (req, res) => {
    control.watch(id(req), req.lease);
    await control.hold(id(req));
    res.end("too late");
  });
  app.get(
    "/early",
    semaphore("early", 1, { client, leaseMs: 200, heartbeatMs: 50, onLeaseLost: recordLoss }),
    async (req, res) => {
      control.watch(id(req), req.lease);
      const released = await req.lease?.release();
      await control.hold(id(req));
      res.json({ released });
    },
  );
  // A slow step before leasehold (an auth call, a body parser): the client may leave meanwhile.
  app.get(
    "/late",
    (req, _res, next) => void control.hold(`before:${id(req)}`).then(() => next()),
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
  app.get("/skip", semaphore("skip", 1, { client, skip: (req) => req.get("x-skip") === "1" }), hold);
  app.get(
    "/tenant-limit",
    semaphore("tl", (req) => (tenant(req) === "big" ? 2 : 1), { client, key: tenant }),
    hold,
  );
  app.get("/queue", semaphore("queue", 1, { client, waitMs: 10_000, maxQueue: 1 }), async (req, res) => {
    control.watch(id(req), req.lease);
    await control.hold(id(req));
    res.json({ waitedMs: req.lease?.waitedMs });
  });
  app.get("/spin", semaphore("spin", 1, { client, retries: 200, retryDelayMs: 10 }), hold);
  const onStoreUnavailable = (error: unknown) => control.reasons.set("store", error);
  app.get("/open", semaphore("open", 1, { client, onStoreError: "fail-open", onStoreUnavailable }), (req, res) => {
    res.json({ lease: req.lease !== undefined });
  });
  // Tenants sharing one id (tenants.test.ts), and the fence (fencing.test.ts). The view holds
  // when the request names an x-id, and answers what the handler's lease shows.
  const view = async (req: Request, res: Response) => {
    const lease = req.lease;
    if (req.get("x-id") !== undefined) await control.hold(id(req));
    res.json({
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
  app.get("/tenants-optional", semaphore("optional", 2, { client, tenant: (req) => req.get("x-tenant"), tenantLimit: 1 }), view);
  app.get("/tenants-queue", semaphore("tenants-queue", 1, { client, tenant, tenantLimit: 1, waitMs: 10_000 }), view);
  app.get("/fenced", semaphore("fenced", 2, { client, exposeFence: true }), view);
  app.get("/fenced-lock", lock("fenced-lock", { client, exposeFence: true }), view);
  app.get("/unfenced", semaphore("unfenced", 2, { client }), view);
  // Errors go to the framework's error path; the status tells the test which error it was.
  app.use((error: Error, _req: Request, res: Response, _next: unknown) => {
    if (!res.headersSent) res.status(500).json({ error: error.name, message: error.message });
  });
}

export function expressHarness(version: 4 | 5): Harness {
  return {
    name: `Express ${version}`,
    start(store, control) {
      const app = (version === 4 ? express4() : express5()) as express5.Express;
      routes(app, store, control);
      return listen(createServer(app));
    },
  };
}
