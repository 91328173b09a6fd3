import { PassThrough } from "node:stream";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { lock, semaphore } from "../../integrations/fastify/index.js";
import type { Store } from "../../src/store/index.js";
import { type Control, connectionsOf, type Harness, type RunningApp } from "./harness.js";

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};
const tenant = (request: FastifyRequest) => header(request, "x-tenant") ?? "";
const id = (request: FastifyRequest) => header(request, "x-id") ?? "anonymous";
const path = (request: FastifyRequest) => request.url.split("?")[0]?.slice(1) ?? "";

/** The same routes as express-app.ts, written the Fastify way: leasehold's hook as each route's `onRequest`. */
export function buildFastifyApp(store: Store, control: Control): FastifyInstance {
  const app = Fastify();
  const client = store;
  const hold = async (request: FastifyRequest, reply: FastifyReply) => {
    const lease = request.lease;
    control.watch(id(request), lease);
    await control.hold(id(request));
    // A lease lost meanwhile was answered already.
    if (reply.sent || reply.raw.headersSent) return reply;
    return { key: lease?.key, limit: lease && "limit" in lease ? lease.limit : null };
  };
  app.get("/work", { onRequest: semaphore("work", 2, { client, key: tenant }) }, hold);
  app.get("/work-too", { onRequest: semaphore("work", 2, { client, key: tenant }) }, hold);
  app.post("/orders/:id", { onRequest: lock("order", { client, key: (req) => (req.params as { id: string }).id }) }, hold);
  app.get("/quota", { onRequest: semaphore("quota", 1, { client, status: 429 }) }, hold);
  app.get(
    "/custom",
    {
      onRequest: semaphore("custom", 1, {
        client,
        onRejected: (_request, reply, rejection) => {
          reply.code(418).send({ custom: "refusal", retryAfter: rejection.retryAfter });
        },
      }),
    },
    hold,
  );
  app.get("/stream", { onRequest: semaphore("stream", 1, { client }) }, async (request, reply) => {
    control.watch(id(request), request.lease);
    const body = new PassThrough();
    body.write("first\n");
    void control.hold(id(request)).then(() => body.end("second\n"));
    return reply.send(body);
  });
  app.get("/throw", { onRequest: semaphore("throw", 1, { client }) }, () => {
    throw new Error("handler failed");
  });
  app.get("/reject", { onRequest: semaphore("reject", 1, { client }) }, async () => {
    await Promise.resolve();
    throw new Error("handler rejected");
  });
  const onLeaseLost = (error: unknown, request: FastifyRequest) => control.reasons.set(`hook:${path(request)}`, error);
  app.get("/lose", { onRequest: semaphore("lose", 1, { client, heartbeatMs: 20, onLeaseLost }) }, async (request) => {
    const lease = request.lease!;
    control.watch(id(request), lease);
    await control.steal(lease);
    await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
  });
  app.get("/lose-stream", { onRequest: semaphore("lose-stream", 1, { client, heartbeatMs: 20 }) }, async (request, reply) => {
    const lease = request.lease!;
    control.watch(id(request), lease);
    const body = new PassThrough();
    body.write("first\n");
    reply.send(body);
    await control.steal(lease);
    return reply;
  });
  // Disconnects: a handler that keeps working after the abort until the test lets it finish,
  // one that ignores the abort and never ends, and one that gives its permit back early.
  const recordLoss = (error: unknown, request: FastifyRequest) => control.leaseLost(id(request), error);
  app.get("/linger", { onRequest: semaphore("linger", 1, { client, disconnectGraceMs: 60_000, onLeaseLost: recordLoss }) }, hold);
  app.get(
    "/abandon",
    { onRequest: semaphore("abandon", 1, { client, disconnectGraceMs: 200, onLeaseLost: recordLoss }) },
    async (request, reply) => {
      control.watch(id(request), request.lease);
      await control.hold(id(request));
      return reply.send("too late");
    },
  );
  app.get(
    "/early",
    { onRequest: semaphore("early", 1, { client, leaseMs: 200, heartbeatMs: 50, onLeaseLost: recordLoss }) },
    async (request) => {
      control.watch(id(request), request.lease);
      const released = await request.lease?.release();
      await control.hold(id(request));
      return { released };
    },
  );
  // A slow step before leasehold (an auth call, a body parser): the client may leave meanwhile.
  app.get(
    "/late",
    {
      onRequest: [
        (request, _reply, done) => void control.hold(`before:${id(request)}`).then(() => done()),
        semaphore("late", 1, { client }),
      ],
    },
    hold,
  );
  app.get("/empty-key", { onRequest: semaphore("ek", 1, { client, key: () => "" }) }, hold);
  app.get(
    "/throwing-key",
    {
      onRequest: semaphore("tk", 1, {
        client,
        key: () => {
          throw new Error("no tenant header");
        },
      }),
    },
    hold,
  );
  app.get("/skip", { onRequest: semaphore("skip", 1, { client, skip: (req) => header(req, "x-skip") === "1" }) }, hold);
  app.get(
    "/tenant-limit",
    { onRequest: semaphore("tl", (req) => (tenant(req) === "big" ? 2 : 1), { client, key: tenant }) },
    hold,
  );
  app.get("/queue", { onRequest: semaphore("queue", 1, { client, waitMs: 10_000, maxQueue: 1 }) }, async (request) => {
    control.watch(id(request), request.lease);
    await control.hold(id(request));
    return { waitedMs: request.lease?.waitedMs };
  });
  app.get("/spin", { onRequest: semaphore("spin", 1, { client, retries: 200, retryDelayMs: 10 }) }, hold);
  const onStoreUnavailable = (error: unknown) => control.reasons.set("store", error);
  app.get(
    "/open",
    { onRequest: semaphore("open", 1, { client, onStoreError: "fail-open", onStoreUnavailable }) },
    async (request) => ({ lease: request.lease !== undefined }),
  );
  // Tenants sharing one id (tenants.test.ts), and the fence (fencing.test.ts). The view holds
  // when the request names an x-id, and answers what the handler's lease shows.
  const view = async (request: FastifyRequest) => {
    const lease = request.lease;
    if (header(request, "x-id") !== undefined) await control.hold(id(request));
    return {
      key: lease?.key,
      limit: lease && "limit" in lease ? lease.limit : null,
      tenant: lease && "tenant" in lease ? (lease.tenant ?? null) : null,
      fence: lease?.fence,
    };
  };
  const caps: Record<string, number> = { premium: 2, greedy: 4, broken: 0 };
  app.get("/tenants", { onRequest: semaphore("tenants", 3, { client, tenant, tenantLimit: 2, exposeFence: true }) }, view);
  app.get("/tenants-premium", { onRequest: semaphore("premium", 3, { client, tenant, tenantLimit: (t) => caps[t] ?? 1 }) }, view);
  app.get(
    "/tenants-status",
    { onRequest: semaphore("tenants-status", 2, { client, tenant, tenantLimit: 1, status: 503 }) },
    view,
  );
  app.get(
    "/tenants-optional",
    { onRequest: semaphore("optional", 2, { client, tenant: (req) => header(req, "x-tenant"), tenantLimit: 1 }) },
    view,
  );
  app.get(
    "/tenants-queue",
    { onRequest: semaphore("tenants-queue", 1, { client, tenant, tenantLimit: 1, waitMs: 10_000 }) },
    view,
  );
  app.get("/fenced", { onRequest: semaphore("fenced", 2, { client, exposeFence: true }) }, view);
  app.get("/fenced-lock", { onRequest: lock("fenced-lock", { client, exposeFence: true }) }, view);
  app.get("/unfenced", { onRequest: semaphore("unfenced", 2, { client }) }, view);
  // Errors go to the framework's error path; the status tells the test which error it was.
  app.setErrorHandler((error: Error, _request, reply) => {
    reply.code(500).send({ error: error.name, message: error.message });
  });
  return app;
}

/** Starts a Fastify app on a free port, over real HTTP. */
export async function listenFastify(app: FastifyInstance): Promise<RunningApp> {
  await app.listen({ port: 0, host: "127.0.0.1" });
  const { port } = app.server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connections: connectionsOf(app.server),
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

export const fastifyHarness: Harness = {
  name: "Fastify",
  start: (store, control) => listenFastify(buildFastifyApp(store, control)),
};
