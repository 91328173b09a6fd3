import "reflect-metadata";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { Controller, Get, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import * as onExpress from "../../integrations/express/index.js";
import { PROBLEM_TYPES } from "../../integrations/express/index.js";
import * as onFastify from "../../integrations/fastify/index.js";
import * as onHono from "../../integrations/hono/index.js";
import { Lease, LeaseholdModule, Semaphore, type SemaphoreLease } from "../../integrations/nestjs/index.js";
import { semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { uniquePrefix } from "../support/redis.js";
import { eventually, gate, storesUnderTest } from "../support/stores.js";

/** A route's handler as the test drives it: told (its signal aborted, with what), then let go by the test. */
class Work {
  readonly told: string[] = [];
  entered = 0;
  readonly release = gate();

  /** The handler's body: waits to be told, then for the test, and answers with what it was told. */
  async run(signal: AbortSignal): Promise<{ stopped: string }> {
    this.entered++;
    const reason = await new Promise<string>((resolve) =>
      signal.addEventListener("abort", () => resolve((signal.reason as Error).name), { once: true }),
    );
    this.told.push(reason);
    await this.release.opened;
    return { stopped: reason };
  }
}

/** One framework's app with one guarded route, and how to close it as docs/operations.md says. */
interface App {
  /** Answers a GET of /work: status and parsed body. */
  get(): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Begins the shutdown; resolves when leasehold (and the app) let go. */
  close(): Promise<void>;
}

const overHttp = (url: string) => async () => {
  const response = await fetch(`${url}/work`, { headers: { connection: "close" } });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

const FRAMEWORKS: Record<string, (store: Store, prefix: string, work: Work) => Promise<App>> = {
  async Express(store, prefix, work) {
    const route = onExpress.semaphore("work", 1, { client: store, prefix });
    const app = express();
    app.get("/work", route, async (req, res) => {
      res.json(await work.run(req.lease!.signal));
    });
    const server = createServer(app);
    const url = await listen(server);
    return { get: overHttp(url), close: () => route.close({ graceMs: 60_000 }).then(() => closeServer(server)) };
  },
  async Fastify(store, prefix, work) {
    const route = onFastify.semaphore("work", 1, { client: store, prefix });
    const app = Fastify();
    app.get("/work", { onRequest: route }, async (request) => work.run(request.lease!.signal));
    const url = await app.listen({ port: 0, host: "127.0.0.1" });
    // The hook first, while the server still answers: app.close() answers later requests with Fastify's own 503.
    return { get: overHttp(url), close: () => route.close({ graceMs: 60_000 }).then(() => app.close()) };
  },
  async "Hono (Node)"(store, prefix, work) {
    const route = onHono.semaphore("work", 1, { client: store, prefix });
    const app = new Hono();
    app.get("/work", route, async (c) => c.json(await work.run(c.get("lease")!.signal)));
    const server = createAdaptorServer({ fetch: app.fetch }) as Server;
    const url = await listen(server);
    return { get: overHttp(url), close: () => route.close({ graceMs: 60_000 }).then(() => closeServer(server)) };
  },
  async "Hono (fetch)"(store, prefix, work) {
    const route = onHono.semaphore("work", 1, { client: store, prefix });
    const app = new Hono();
    app.get("/work", route, async (c) => c.json(await work.run(c.get("lease")!.signal)));
    app.onError((error) =>
      error instanceof onHono.LeaseRejectedException ? error.getResponse() : new Response(null, { status: 500 }),
    );
    return {
      get: async () => {
        const response = await app.fetch(new Request("http://local/work"));
        return { status: response.status, body: (await response.json()) as Record<string, unknown> };
      },
      close: () => route.close({ graceMs: 60_000 }),
    };
  },
  async NestJS(store, prefix, work) {
    @Controller()
    class WorkController {
      @Get("work")
      @Semaphore("work", 1)
      work(@Lease() lease: SemaphoreLease) {
        return work.run(lease.signal);
      }
    }
    @Module({
      imports: [LeaseholdModule.forRoot({ client: store, prefix, shutdownGraceMs: 60_000 })],
      controllers: [WorkController],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, "127.0.0.1");
    const url = await app.getUrl();
    // app.close() runs the module's shutdown hook, then closes the server.
    return { get: overHttp(url.replace("[::1]", "127.0.0.1")), close: () => app.close() };
  },
};

describe.each(Object.keys(FRAMEWORKS))("closing on %s", (framework) => {
  it.each(storesUnderTest.filter((store) => store.name === "memory" || store.name === "ioredis"))(
    "tells the request in flight, answers a later one 503 shutting-down, and frees the permit ($name store)",
    async ({ make }) => {
      const store = make();
      const prefix = uniquePrefix();
      const work = new Work();
      const app = await FRAMEWORKS[framework]!(store, prefix, work);
      const seen = semaphore({ client: store, limit: 1, prefix });

      const inFlight = app.get();
      await eventually(() => work.entered === 1);
      const closing = app.close();
      await eventually(() => work.told.length === 1);
      expect(work.told).toEqual(["ShutdownError"]);

      // The server still answers while the request in flight finishes: a later request is refused, not admitted.
      const late = await app.get();
      expect(late.status).toBe(503);
      expect(late.body).toMatchObject({ type: PROBLEM_TYPES["shutting-down"], title: "Shutting down", status: 503, key: "work" });
      expect(work.entered).toBe(1);

      work.release.open();
      expect(await inFlight).toEqual({ status: 200, body: { stopped: "ShutdownError" } });
      await closing;
      expect((await seen.stats("work")).used).toBe(0);
    },
  );
});
