// The HTTP servers of the overhead benchmark for one framework, in a process of
// their own so the load generator does not share their event loop: FRAMEWORK
// (express|hono|nestjs|fastify), and MODES and PORTS, two comma-separated lists of the
// same length (mode: none|async|memory|redis|rejecting; Hono also wrapped and redis-wrapped: the
// same guard as one handler, `middleware.wrap(handler)`; and redis-bare: the floor of any Redis guard, two bare
// ioredis script calls per request, a take before the handler and a return once the response is written; Fastify also
// rate-limit and rate-limit-redis: @fastify/rate-limit on the same route, local and on Redis). Every variant lives in
// this one process, so all of them run with the same heap and loaded code.
// Prints "listening" when all are ready.
import "reflect-metadata";
import { randomBytes } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import rateLimit from "@fastify/rate-limit";
import { createAdaptorServer } from "@hono/node-server";
import { type CanActivate, Controller, Get, Injectable, Module, UseGuards } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import express from "express";
import Fastify from "fastify";
import { type Context, Hono } from "hono";
import { Redis } from "ioredis";
import { semaphore as expressSemaphore } from "../dist/esm/integrations/express/index.js";
import { semaphore as fastifySemaphore } from "../dist/esm/integrations/fastify/index.js";
import { semaphore as honoSemaphore } from "../dist/esm/integrations/hono/index.js";
import { LeaseholdModule, Semaphore } from "../dist/esm/integrations/nestjs/index.js";
import { type ClientInput, memoryStore, semaphore } from "../dist/esm/src/index.js";

const framework = process.env.FRAMEWORK;
const modes = (process.env.MODES ?? "").split(",");
const ports = (process.env.PORTS ?? "").split(",").map(Number);
const redis = modes.some((mode) => mode.startsWith("redis")) ? new Redis(process.env.REDIS_URL as string) : undefined;
const limit = 10_000;

// COUNT_CALLS=1: on SIGTERM, print the script calls by script and item count, and the writes to the Redis
// socket (bench/floors/http-redis-side.mjs --count): how much coalescing the HTTP load really gets.
if (process.env.COUNT_CALLS === "1" && redis !== undefined) {
  const counts = new Map<string, number>();
  const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
  (redis as unknown as { evalsha: typeof evalsha }).evalsha = (...args: unknown[]) => {
    const name = `${String(args[0]).slice(0, 8)} args=${args.length - 2 - Number(args[1])}`;
    counts.set(name, (counts.get(name) ?? 0) + 1);
    return evalsha(...args);
  };
  let writes = 0;
  redis.once("ready", () => {
    const stream = (redis as unknown as { stream: { write: (...a: unknown[]) => boolean } }).stream;
    const write = stream.write.bind(stream);
    stream.write = (...a: unknown[]) => {
      writes++;
      return write(...a);
    };
  });
  process.on("SIGTERM", () => {
    console.error(JSON.stringify({ writes, calls: Object.fromEntries(counts) }));
    process.exit(0);
  });
}

// The cheapest guard over Redis with the server's clock: TIME, a ZCARD check and a ZADD to take, a ZREM to
// give back; no bound, no coalescing, no lease keeping. A floor to measure leasehold against, not a limiter.
const BARE_TAKE =
  "local t = redis.call('TIME') local now = t[1] * 1000 + math.floor(t[2] / 1000) " +
  "if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end " +
  "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1]) return 1";
const BARE_RETURN = "return redis.call('ZREM', KEYS[1], ARGV[1])";

function bareGuard(name: string) {
  const client = redis as Redis & {
    bareTake(key: string, token: string, limit: number, leaseMs: number): Promise<number>;
    bareReturn(key: string, token: string): Promise<number>;
  };
  client.defineCommand("bareTake", { numberOfKeys: 1, lua: BARE_TAKE });
  client.defineCommand("bareReturn", { numberOfKeys: 1, lua: BARE_RETURN });
  const key = `{${name}}`;
  return async (c: Context) => {
    const token = randomBytes(16).toString("base64url");
    if ((await client.bareTake(key, token, limit, 60_000)) !== 1) return c.json({ full: true }, 503);
    (c.env as { outgoing: ServerResponse }).outgoing.once("finish", () => void client.bareReturn(key, token));
    return c.json({ ok: true });
  };
}

async function serve(mode: string, port: number): Promise<void> {
  const client: ClientInput = mode.startsWith("redis") && redis !== undefined ? redis : memoryStore();
  // "async": a no-op async middleware, the fair baseline for any guard (Hono's node-server, for one,
  // answers synchronous handlers on a faster path that no async middleware can take).
  const guarded = mode !== "none" && mode !== "async";
  const asyncNoop = mode === "async";
  const name = `bench-${framework}-${mode}`;
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
    await new Promise<void>((resolve) => createServer(app).listen(port, "127.0.0.1", resolve));
  } else if (framework === "fastify") {
    const app = Fastify();
    const handler = async () => ({ ok: true });
    if (mode.startsWith("rate-limit")) {
      // The same route behind @fastify/rate-limit's own hook, with a ceiling no run reaches: what a
      // Fastify user pays for that plugin's per-request bookkeeping, beside what leasehold costs.
      await app.register(rateLimit, { global: false, ...(mode === "rate-limit-redis" ? { redis } : {}) });
      app.get("/", { onRequest: app.rateLimit({ max: 1_000_000_000, timeWindow: 60_000 }) }, handler);
    } else if (guarded) app.get("/", { onRequest: fastifySemaphore(name, routeLimit, { client }) }, handler);
    else if (asyncNoop) app.get("/", { onRequest: async () => {} }, handler);
    else app.get("/", handler);
    await app.listen({ port, host: "127.0.0.1" });
  } else if (framework === "hono") {
    const app = new Hono();
    if (mode === "redis-bare") app.get("/", bareGuard(name));
    else if (mode.endsWith("wrapped"))
      app.get(
        "/",
        honoSemaphore(name, routeLimit, { client }).wrap((c) => c.json({ ok: true })),
      );
    else if (guarded) app.get("/", honoSemaphore(name, routeLimit, { client }), (c) => c.json({ ok: true }));
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
    await new Promise<void>((resolve) => {
      createAdaptorServer({ fetch: app.fetch }).listen(port, "127.0.0.1", () => resolve());
    });
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
    @Module({
      imports: [LeaseholdModule.forRoot({ client })],
      controllers: [guarded ? Guarded : asyncNoop ? AsyncGuarded : Plain],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(port, "127.0.0.1");
  }
}

await Promise.all(modes.map((mode, i) => serve(mode, ports[i] as number)));
console.log("listening");
process.on("SIGINT", () => process.exit(0));
