// The CPU cost of one Hono request in process, without sockets or a load generator, for counting
// instructions: on this shared machine wall-clock figures swing by 2x, instruction counts do not.
//
//   npm run build
//   MODE=memory N=10000 valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded bench/http-cost.mjs
//   MODE=memory N=40000 valgrind ... (the same)
//
// (instructions at N=40000 - instructions at N=10000) / 30000 = instructions per request, start-up cancelled.
// Bytes allocated per request: MODE=memory N=5000 ALLOC=3000 node --expose-gc --min-semi-space-size=64 --max-semi-space-size=64 bench/http-cost.mjs
// MODE: none (a plain route), async (behind a no-op async middleware), run (behind the engine's `run`
// called by hand), floor (the least a guard that holds its permit until the response's last byte can
// do with the engine's internal `run`: what the adapter is measured against), memory (behind
// leasehold's Hono middleware on the embedded store), wrapped (the same guard as one handler,
// `middleware.wrap(handler)`), redis-wrapped, rejecting (the same middleware refusing every
// request), redis (the middleware on Redis at REDIS_URL: the client side of its two script calls), redis-rejecting
// (the refusing middleware on Redis).
// FRAMEWORK=express: the same through Express (modes none, async, memory, rejecting).
import { IncomingMessage, ServerResponse } from "node:http";
import { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { semaphore as honoSemaphore } from "../dist/esm/integrations/hono/index.js";
import { memoryStore, semaphore } from "../dist/esm/src/index.js";
import { semaphoreEngine } from "../dist/esm/src/semaphore/index.js";

/** A socket that accepts every write and never reads. */
class NullSocket extends Duplex {
  _read() {}
  _write(_chunk, _encoding, done) {
    done();
  }
  _writev(_chunks, done) {
    done();
  }
}

function exchange() {
  const socket = new NullSocket();
  const req = new IncomingMessage(socket);
  req.method = "GET";
  req.url = "/";
  req.headers = { host: "localhost" };
  req.rawHeaders = ["host", "localhost"];
  req.complete = true;
  req.push(null);
  const res = new ServerResponse(req);
  res.assignSocket(socket);
  return { req, res };
}

const mode = process.env.MODE ?? "memory";
let done = () => {};
const app = new Hono();
app.onError((error, c) => ("getResponse" in error ? error.getResponse() : c.text(String(error), 500)));
const ok = (c) => c.json({ ok: true });
if (mode === "none") app.get("/", ok);
else if (mode === "async") app.get("/", async (_c, next) => await next(), ok);
else if (mode === "run") {
  const slots = semaphore({ client: memoryStore(), limit: 100_000 });
  app.get("/", async (_c, next) => await slots.run("cost", () => next()), ok);
} else if (mode === "floor") {
  // One promise for the middleware, one for the response's end, two listeners: no exchange, no view.
  const engine = semaphoreEngine({ client: memoryStore(), limit: 100_000 });
  app.get(
    "/",
    (c, next) =>
      new Promise((resolve, reject) => {
        const res = c.env.outgoing;
        let responded;
        const ended = new Promise((done) => {
          responded = done;
        });
        res.on("finish", responded);
        res.on("close", responded);
        engine
          .run("cost", (lease) => {
            c.set("lease", lease);
            next().then(resolve, reject);
            return ended;
          })
          .catch(reject);
      }),
    ok,
  );
} else if (mode === "redis") {
  const { Redis } = await import("ioredis");
  const redis = new Redis(process.env.REDIS_URL);
  app.get("/", honoSemaphore("cost", 100_000, { client: redis }), ok);
  done = () => redis.disconnect();
} else if (mode === "rejecting") {
  // The one permit is taken for good: every request is refused (503 problem+json).
  const client = memoryStore();
  await semaphore({ client, limit: 1 }).acquire("cost", { leaseMs: 3_600_000 });
  app.get("/", honoSemaphore("cost", 1, { client }), ok);
} else if (mode === "redis-rejecting") {
  // The same refusals over Redis at REDIS_URL: what a refusal costs the client side of one script call.
  const { Redis } = await import("ioredis");
  const redis = new Redis(process.env.REDIS_URL);
  const name = `cost-${process.pid}`;
  await semaphore({ client: redis, limit: 1 }).acquire(name, { leaseMs: 3_600_000 });
  app.get("/", honoSemaphore(name, 1, { client: redis }), ok);
  done = () => redis.disconnect();
} else if (mode === "wrapped") {
  // The same guard as one handler (`middleware.wrap(handler)`): no middleware chain.
  app.get("/", honoSemaphore("cost", 100_000, { client: memoryStore() }).wrap(ok));
} else if (mode === "redis-wrapped") {
  const { Redis } = await import("ioredis");
  const redis = new Redis(process.env.REDIS_URL);
  app.get("/", honoSemaphore("cost", 100_000, { client: redis }).wrap(ok));
  done = () => redis.disconnect();
} else app.get("/", honoSemaphore("cost", 100_000, { client: memoryStore() }), ok);
let listener = getRequestListener(app.fetch);
if (process.env.FRAMEWORK === "express") {
  // The same request through Express instead (modes none, async, memory, rejecting).
  const { default: express } = await import("express");
  const { semaphore: expressSemaphore } = await import("../dist/esm/integrations/express/index.js");
  const expressApp = express();
  const handler = (_req, res) => void res.json({ ok: true });
  if (mode === "none") expressApp.get("/", handler);
  else if (mode === "async") expressApp.get("/", (_req, _res, next) => void Promise.resolve().then(() => next()), handler);
  else if (mode === "rejecting") {
    const client = memoryStore();
    await semaphore({ client, limit: 1 }).acquire("cost", { leaseMs: 3_600_000 });
    expressApp.get("/", expressSemaphore("cost", 1, { client }), handler);
  } else expressApp.get("/", expressSemaphore("cost", 100_000, { client: memoryStore() }), handler);
  listener = expressApp;
}

async function one() {
  const { req, res } = exchange();
  const finished = new Promise((resolve) => res.once("finish", resolve));
  await listener(req, res);
  await finished;
  // What the server emits once the response is done; the middleware listens for it.
  res.emit("close");
}

// 64 requests in flight, as the HTTP scenario's 64 connections.
async function serve(n) {
  let left = n;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (left-- > 0) await one();
    }),
  );
}
await serve(Number(process.env.N ?? 10_000));
if (process.env.ALLOC !== undefined) {
  // Bytes allocated per request: with `node --expose-gc --min-semi-space-size=64 --max-semi-space-size=64`, ALLOC requests
  // run between two full collections without a scavenge, so the heap's growth is what they allocated.
  const requests = Number(process.env.ALLOC);
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  await serve(requests);
  const after = process.memoryUsage().heapUsed;
  console.log(`${mode}: ${Math.round((after - before) / requests)} bytes allocated per request`);
}
done();
