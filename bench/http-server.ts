// One HTTP server for the overhead benchmark, in its own process so the load
// generator does not share its event loop: FRAMEWORK (express|hono|nestjs),
// MODE (none|memory|redis|rejecting), PORT. Prints "listening" when ready.
import "reflect-metadata";
import { createServer } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { type CanActivate, Controller, Get, Injectable, Module, UseGuards } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import express from "express";
import { Hono } from "hono";
import { Redis } from "ioredis";
import { semaphore as expressSemaphore } from "../dist/esm/integrations/express/index.js";
import { semaphore as honoSemaphore } from "../dist/esm/integrations/hono/index.js";
import { LeaseholdModule, Semaphore } from "../dist/esm/integrations/nestjs/index.js";
import { type ClientInput, memoryStore, semaphore } from "../dist/esm/src/index.js";

const [framework, mode, port] = [process.env.FRAMEWORK, process.env.MODE, Number(process.env.PORT)];
const client: ClientInput | undefined = mode === "redis" ? new Redis(process.env.REDIS_URL as string) : memoryStore();
// "async": a no-op async middleware, the fair baseline for any guard (Hono's node-server, for one,
// answers synchronous handlers on a faster path that no async middleware can take).
const guarded = mode !== "none" && mode !== "async";
const asyncNoop = mode === "async";
const limit = 10_000;
const name = `bench-${framework}`;

if (mode === "rejecting") {
  // Every permit is taken: each request is refused. Compares the cost of refusing with admitting.
  await semaphore({ client, limit: 1 }).acquire(name, { leaseMs: 600_000 });
}
const routeLimit = mode === "rejecting" ? 1 : limit;

if (framework === "express") {
  const app = express();
  const handler = (_req: express.Request, res: express.Response) => void res.json({ ok: true });
  if (guarded) app.get("/", expressSemaphore(name, routeLimit, { client }), handler);
  else if (asyncNoop) app.get("/", (_req, _res, next) => void Promise.resolve().then(() => next()), handler);
  else app.get("/", handler);
  createServer(app).listen(port, "127.0.0.1", () => console.log("listening"));
} else if (framework === "hono") {
  const app = new Hono();
  if (guarded) app.get("/", honoSemaphore(name, routeLimit, { client }), (c) => c.json({ ok: true }));
  else if (asyncNoop)
    app.get(
      "/",
      async (_c, next) => await next(),
      (c) => c.json({ ok: true }),
    );
  else app.get("/", (c) => c.json({ ok: true }));
  app.onError((error, c) =>
    "getResponse" in error ? (error as { getResponse(): Response }).getResponse() : c.text("error", 500),
  );
  createAdaptorServer({ fetch: app.fetch }).listen(port, "127.0.0.1", () => console.log("listening"));
} else {
  @Controller()
  class Plain {
    @Get()
    get() {
      return { ok: true };
    }
  }
  @Controller()
  @Semaphore(name, routeLimit)
  class Guarded {
    @Get()
    get() {
      return { ok: true };
    }
  }
  @Injectable()
  class AsyncNoop implements CanActivate {
    async canActivate() {
      return true;
    }
  }
  @Controller()
  @UseGuards(AsyncNoop)
  class AsyncGuarded {
    @Get()
    get() {
      return { ok: true };
    }
  }
  @Module({ imports: [LeaseholdModule.forRoot({ client })], controllers: [guarded ? Guarded : asyncNoop ? AsyncGuarded : Plain] })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(port, "127.0.0.1");
  console.log("listening");
}
process.on("SIGINT", () => process.exit(0));
