// An HTTP app (FRAMEWORK: express | fastify | hono | nest) over Redis that shuts down on SIGTERM the way
// docs/operations.md ("Shutting down") says, and must then exit by itself: no process.exit.
// Routes: /polite stops when told; /stubborn ignores its signal; /queue admits one and queues the rest.
import "reflect-metadata";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Controller, Get, Inject, Injectable, Module, type OnApplicationShutdown } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { Redis } from "ioredis";
import * as onExpress from "../../integrations/express/index.js";
import * as onFastify from "../../integrations/fastify/index.js";
import * as onHono from "../../integrations/hono/index.js";
import { Lease, LeaseholdGuard, LeaseholdModule, Semaphore, type SemaphoreLease } from "../../integrations/nestjs/index.js";

const framework = process.env.FRAMEWORK ?? "express";
const prefix = process.env.PREFIX ?? "shutdown";
const graceMs = Number(process.env.GRACE_MS ?? 1000);
const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/** Resolves with the name of the reason `signal` aborted with. */
const told = (signal: AbortSignal): Promise<string> =>
  new Promise((resolve) => signal.addEventListener("abort", () => resolve((signal.reason as Error).name), { once: true }));
/** Work that never ends and ignores its signal (and holds nothing that keeps the process alive). */
const forever = (): Promise<never> => new Promise(() => {});

const listening = (server: Server): void => {
  server.once("listening", () => emit({ event: "listening", port: (server.address() as AddressInfo).port }));
};

/**
 * The pattern docs/operations.md gives for Express and Hono: close the middleware (while the server
 * still answers), then the server, then your client.
 */
function shutDownOnSigterm(server: Server, routes: { close(options: { graceMs: number }): Promise<void> }[]): void {
  listening(server);
  process.once("SIGTERM", async () => {
    const closing = Promise.all(routes.map((route) => route.close({ graceMs })));
    emit({ event: "closing" });
    await closing;
    emit({ event: "closed" });
    server.close();
    await redis.quit();
  });
}

if (framework === "express") {
  const routes = {
    polite: onExpress.semaphore("polite", 5, { client: redis, prefix }),
    stubborn: onExpress.semaphore("stubborn", 5, { client: redis, prefix }),
    queue: onExpress.semaphore("queue", 1, { client: redis, prefix, waitMs: 60_000 }),
  };
  const app = express();
  app.get("/polite", routes.polite, async (req, res) => {
    emit({ event: "entered", route: "polite" });
    res.json({ stopped: await told(req.lease!.signal) });
  });
  app.get("/queue", routes.queue, async (req, res) => {
    emit({ event: "entered", route: "queue" });
    res.json({ stopped: await told(req.lease!.signal) });
  });
  app.get("/stubborn", routes.stubborn, async () => {
    emit({ event: "entered", route: "stubborn" });
    await forever();
  });
  shutDownOnSigterm(app.listen(0), Object.values(routes));
}

if (framework === "fastify") {
  const routes = {
    polite: onFastify.semaphore("polite", 5, { client: redis, prefix }),
    stubborn: onFastify.semaphore("stubborn", 5, { client: redis, prefix }),
    queue: onFastify.semaphore("queue", 1, { client: redis, prefix, waitMs: 60_000 }),
  };
  const app = Fastify();
  app.get("/polite", { onRequest: routes.polite }, async (request) => {
    emit({ event: "entered", route: "polite" });
    return { stopped: await told(request.lease!.signal) };
  });
  app.get("/queue", { onRequest: routes.queue }, async (request) => {
    emit({ event: "entered", route: "queue" });
    return { stopped: await told(request.lease!.signal) };
  });
  app.get("/stubborn", { onRequest: routes.stubborn }, async () => {
    emit({ event: "entered", route: "stubborn" });
    return forever();
  });
  // The hooks close first, while the server still answers (app.close() would answer later
  // requests with Fastify's own 503 at once), then the app, then your client.
  listening(app.server);
  process.once("SIGTERM", async () => {
    const closing = Promise.all(Object.values(routes).map((route) => route.close({ graceMs })));
    emit({ event: "closing" });
    await closing;
    emit({ event: "closed" });
    await app.close();
    await redis.quit();
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
}

if (framework === "hono") {
  const routes = {
    polite: onHono.semaphore("polite", 5, { client: redis, prefix }),
    stubborn: onHono.semaphore("stubborn", 5, { client: redis, prefix }),
    queue: onHono.semaphore("queue", 1, { client: redis, prefix, waitMs: 60_000 }),
  };
  const app = new Hono();
  app.get("/polite", routes.polite, async (c) => {
    emit({ event: "entered", route: "polite" });
    return c.json({ stopped: await told(c.get("lease")!.signal) });
  });
  app.get("/queue", routes.queue, async (c) => {
    emit({ event: "entered", route: "queue" });
    return c.json({ stopped: await told(c.get("lease")!.signal) });
  });
  app.get("/stubborn", routes.stubborn, async () => {
    emit({ event: "entered", route: "stubborn" });
    return forever();
  });
  shutDownOnSigterm(serve({ fetch: app.fetch, port: 0 }) as Server, Object.values(routes));
}

if (framework === "nest") {
  @Controller()
  class RoutesController {
    @Get("polite")
    @Semaphore("polite", 5)
    async polite(@Lease() lease: SemaphoreLease) {
      emit({ event: "entered", route: "polite" });
      return { stopped: await told(lease.signal) };
    }

    @Get("queue")
    @Semaphore("queue", 1, { waitMs: 60_000 })
    async queue(@Lease() lease: SemaphoreLease) {
      emit({ event: "entered", route: "queue" });
      return { stopped: await told(lease.signal) };
    }

    @Get("stubborn")
    @Semaphore("stubborn", 5)
    async stubborn() {
      emit({ event: "entered", route: "stubborn" });
      return forever();
    }
  }

  // Says when the guard that admits the requests starts closing (Nest calls each hook level in turn,
  // so a hook of the app's own may run after it has finished): test instrumentation only.
  const admitting = new WeakSet<object>();
  const { canActivate, beforeApplicationShutdown } = LeaseholdGuard.prototype;
  LeaseholdGuard.prototype.canActivate = function (this: LeaseholdGuard, context) {
    admitting.add(this);
    return canActivate.call(this, context);
  };
  LeaseholdGuard.prototype.beforeApplicationShutdown = function (this: LeaseholdGuard) {
    const closing = beforeApplicationShutdown.call(this);
    if (admitting.has(this)) emit({ event: "closing" });
    return closing;
  };

  const REDIS = Symbol("redis");

  /** Your client: quit once the app (and leasehold with it) has shut down. */
  @Injectable()
  class RedisLifecycle implements OnApplicationShutdown {
    constructor(@Inject(REDIS) private readonly client: Redis) {}

    async onApplicationShutdown() {
      emit({ event: "closed" });
      await this.client.quit();
    }
  }

  @Module({
    imports: [LeaseholdModule.forRoot({ client: redis, prefix, shutdownGraceMs: graceMs })],
    controllers: [RoutesController],
    providers: [{ provide: REDIS, useValue: redis }, RedisLifecycle],
  })
  class AppModule {}

  const app = await NestFactory.create(AppModule, { logger: ["error", "warn"] });
  app.enableShutdownHooks();
  // Nest ends its shutdown by raising the signal again; caught here, so that the process must end
  // by itself, with nothing left running.
  process.on("SIGTERM", () => {});
  listening(app.getHttpServer() as Server);
  await app.listen(0);
}
