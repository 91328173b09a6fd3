import { createServer } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import request from "supertest";
import { describe, expect, it } from "vitest";
import * as expressAdapter from "../../integrations/express/index.js";
import * as fastifyAdapter from "../../integrations/fastify/index.js";
import * as honoAdapter from "../../integrations/hono/index.js";
import { memoryStore } from "../../src/index.js";
import { eventually, gate } from "../support/stores.js";

type Seen = { reason: string; type: string; context: string | undefined };

/**
 * A route of limit 1 that waits 50 ms for a permit, on each framework: what its
 * `onRejected` and `retryAfter` hooks were told, and a gate the holder waits on.
 */
function apps() {
  const { opened, open } = gate();
  const seen: Seen[] = [];
  const contexts: string[] = [];
  const holding = { count: 0 };
  // Each app its own store: one id, one permit per app.
  const options = () => ({
    client: memoryStore(),
    waitMs: 50,
    retryAfter: (refusal: { reason: string; retryAfter: number }) => {
      contexts.push(refusal.reason);
      return refusal.retryAfter;
    },
  });
  const express5 = express();
  express5.get(
    "/",
    expressAdapter.semaphore("reasons", 1, {
      ...options(),
      onRejected: (_req, res, rejection) => {
        seen.push({ reason: rejection.reason, type: rejection.problem.type, context: contexts.pop() });
        res.status(rejection.status).json(rejection.problem);
      },
    }),
    async (_req, res) => {
      holding.count++;
      await opened;
      res.end("ok");
    },
  );
  const hono = new Hono();
  hono.get(
    "/",
    honoAdapter.semaphore("reasons", 1, {
      ...options(),
      onRejected: (c, rejection) => {
        seen.push({ reason: rejection.reason, type: rejection.problem.type, context: contexts.pop() });
        return c.json(rejection.problem, 503);
      },
    }),
    async (c) => {
      holding.count++;
      await opened;
      return c.text("ok");
    },
  );
  const fastify = Fastify();
  fastify.get(
    "/",
    {
      onRequest: fastifyAdapter.semaphore("reasons", 1, {
        ...options(),
        onRejected: (_request, reply, rejection) => {
          seen.push({ reason: rejection.reason, type: rejection.problem.type, context: contexts.pop() });
          reply.code(503).send(rejection.problem);
        },
      }),
    },
    async () => {
      holding.count++;
      await opened;
      return "ok";
    },
  );
  // Routes are ready within a tick: before the test's first request reaches the server.
  void fastify.ready();
  return {
    servers: [createServer(express5), createAdaptorServer({ fetch: hono.fetch }), fastify.server],
    seen,
    open,
    holding,
  };
}

describe("rejection.reason", () => {
  it("is the engine's reason: a wait that ends without a permit is wait-timeout, under the semaphore-full problem type", async () => {
    const { servers, seen, open, holding } = apps();
    for (const server of servers) {
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    }
    const held = servers.map((server) =>
      request(server)
        .get("/")
        .then((res) => res),
    );
    await eventually(() => holding.count === servers.length);
    for (const res of await Promise.all(servers.map((server) => request(server).get("/")))) expect(res.status).toBe(503);
    expect(seen).toHaveLength(servers.length);
    for (const refusal of seen) {
      expect(refusal).toEqual({
        reason: "wait-timeout",
        type: honoAdapter.PROBLEM_TYPES["semaphore-full"],
        context: "wait-timeout",
      });
    }
    open();
    for (const res of await Promise.all(held)) expect(res.status).toBe(200);
    for (const server of servers) server.close();
  });
});
