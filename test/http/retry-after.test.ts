import { createServer, type Server } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import request from "supertest";
import { describe, expect, it } from "vitest";
import * as expressAdapter from "../../integrations/express/index.js";
import * as fastifyAdapter from "../../integrations/fastify/index.js";
import * as honoAdapter from "../../integrations/hono/index.js";
import { memoryStore, redisStore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually, gate } from "../support/stores.js";

/** An app whose one route holds its permit until the test opens the gate of that request. */
function app(options: Parameters<typeof expressAdapter.semaphore>[2] = {}) {
  const gates: (() => void)[] = [];
  const server = express();
  server.get("/", expressAdapter.semaphore("ra", 1, { client: memoryStore(), ...options }), async (_req, res) => {
    const { opened, open } = gate();
    gates.push(open);
    await opened;
    res.end("ok");
  });
  return { http: createServer(server), gates };
}

/** A request that holds its permit (its gate) once it is admitted: resolves once it is, with its response to come. */
async function holding(http: Server, gates: (() => void)[]): Promise<{ response: Promise<request.Response> }> {
  const before = gates.length;
  const response = request(http)
    .get("/")
    .then((r) => r);
  await eventually(() => gates.length > before);
  return { response };
}

describe("Retry-After", () => {
  it("is the 1 s default before any request finished anywhere (not the 60 s lease), then the hold time observed", async () => {
    const { http, gates } = app({ leaseMs: 60_000 });
    const first = await holding(http, gates);
    // Nothing has been observed yet, by any process: a short default rather than the whole lease.
    const early = await request(http).get("/");
    expect(early.status).toBe(503);
    expect(early.headers["retry-after"]).toBe("1");
    // A hold of 1.5 s at least: the estimate follows it.
    await sleep(1500);
    gates[0]?.();
    await first.response;
    const second = await holding(http, gates);
    const later = await request(http).get("/");
    expect(later.status).toBe(503);
    expect(Number(later.headers["retry-after"])).toBeGreaterThanOrEqual(2);
    expect(Number(later.headers["retry-after"])).toBeLessThanOrEqual(10);
    gates[1]?.();
    await second.response;
  });

  it("can be set as a number or computed from the rejection", async () => {
    for (const [retryAfter, expected] of [
      [7, "7"],
      [(rejection: { retryAfter: number }) => rejection.retryAfter * 10 + 0.2, null],
    ] as const) {
      const { http, gates } = app({ retryAfter: retryAfter as never });
      const held = await holding(http, gates);
      const refused = await request(http).get("/");
      const value = Number(refused.headers["retry-after"]);
      if (expected !== null) expect(refused.headers["retry-after"]).toBe(expected);
      else expect(value % 10).toBe(1); // ten times the estimate, rounded up: whole seconds
      expect(JSON.parse(refused.text).retryAfter).toBe(value);
      gates[0]?.();
      await held.response;
    }
  });
});

/**
 * Two processes behind a load balancer: "warm" has served requests on the route, "fresh" has just
 * started (its own middleware and, on Redis, its own store object and connection). Requests hold
 * their permit for 1.5 s at least (the test waits that long before letting one finish), under a
 * lease of 60 s: fresh's first refusal says 2 s or so, as warm's would, never the lease.
 */
type Kind = "semaphore" | "lock";
const adapters: { name: string; kind: Kind; serve(store: Store, prefix: string, gates: (() => void)[]): Server }[] = [
  {
    name: "express",
    kind: "semaphore",
    serve(store, prefix, gates) {
      const server = express();
      const limit = expressAdapter.semaphore("ra", 1, { client: store, prefix, leaseMs: 60_000 });
      server.get("/", limit, async (_req, res) => {
        const { opened, open } = gate();
        gates.push(open);
        await opened;
        res.end("ok");
      });
      return createServer(server);
    },
  },
  {
    name: "fastify",
    kind: "lock",
    serve(store, prefix, gates) {
      const app = Fastify();
      app.get("/", { onRequest: fastifyAdapter.lock("ra", { client: store, prefix, ttlMs: 60_000 }) }, async () => {
        const { opened, open } = gate();
        gates.push(open);
        await opened;
        return "ok";
      });
      // Routes are ready within a tick: before the test's first request reaches the server.
      void app.ready();
      return app.server;
    },
  },
  {
    name: "hono",
    kind: "lock",
    serve(store, prefix, gates) {
      const server = new Hono();
      server.get("/", honoAdapter.lock("ra", { client: store, prefix, ttlMs: 60_000 }), async (c) => {
        const { opened, open } = gate();
        gates.push(open);
        await opened;
        return c.text("ok");
      });
      return createAdaptorServer({ fetch: server.fetch }) as Server;
    },
  },
];
const stores: { name: string; pair(): [Store, Store] }[] = [
  {
    name: "memory",
    pair: () => {
      // One process: the fresh middleware shares the warm one's store, not its observations.
      const store = memoryStore();
      return [store, store];
    },
  },
  { name: "redis", pair: () => [redisStore(newRedis()), redisStore(newRedis())] },
];

describe.each(adapters)("a fresh process's first Retry-After ($name $kind)", (adapter) => {
  it.each(stores)("on the $name store: the hold another process observed, not the lease", async ({ pair }) => {
    const [warmStore, freshStore] = pair();
    const prefix = uniquePrefix();
    const gates: (() => void)[] = [];
    const warm = adapter.serve(warmStore, prefix, gates);
    const fresh = adapter.serve(freshStore, prefix, gates);
    const first = await holding(warm, gates);
    await sleep(1500);
    gates[0]?.();
    expect((await first.response).status).toBe(200);
    // Held again, through warm: fresh, which has seen nothing finish, is refused.
    const second = await holding(warm, gates);
    const refused = await request(fresh).get("/");
    expect(refused.status).toBe(adapter.kind === "semaphore" ? 503 : 409);
    const seconds = Number(refused.headers["retry-after"]);
    expect(seconds).toBeGreaterThanOrEqual(2);
    expect(seconds).toBeLessThanOrEqual(10);
    expect(JSON.parse(refused.text).retryAfter).toBe(seconds);
    gates[1]?.();
    expect((await second.response).status).toBe(200);
  });
});
