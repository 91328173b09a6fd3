// The CPU cost of one Hono request in process, without sockets or a load generator, for counting
// instructions: on this shared machine wall-clock figures swing by 2x, instruction counts do not.
//
//   npm run build
//   MODE=memory N=10000 valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded bench/http-cost.mjs
//   MODE=memory N=40000 valgrind ... (the same)
//
// (instructions at N=40000 - instructions at N=10000) / 30000 = instructions per request, start-up cancelled.
// MODE: none (a plain route), async (behind a no-op async middleware), run (behind the engine's `run`
// called by hand), memory (behind leasehold's Hono middleware on the embedded store), rejecting (the
// same middleware refusing every request).
import { IncomingMessage, ServerResponse } from "node:http";
import { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { semaphore as honoSemaphore } from "../dist/esm/integrations/hono/index.js";
import { memoryStore, semaphore } from "../dist/esm/src/index.js";

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
const app = new Hono();
app.onError((error, c) => ("getResponse" in error ? error.getResponse() : c.text(String(error), 500)));
const ok = (c) => c.json({ ok: true });
if (mode === "none") app.get("/", ok);
else if (mode === "async") app.get("/", async (_c, next) => await next(), ok);
else if (mode === "run") {
  const slots = semaphore({ client: memoryStore(), limit: 100_000 });
  app.get("/", async (_c, next) => await slots.run("cost", () => next()), ok);
} else if (mode === "rejecting") {
  // The one permit is taken for good: every request is refused (503 problem+json).
  const client = memoryStore();
  await semaphore({ client, limit: 1 }).acquire("cost", { leaseMs: 3_600_000 });
  app.get("/", honoSemaphore("cost", 1, { client }), ok);
} else app.get("/", honoSemaphore("cost", 100_000, { client: memoryStore() }), ok);
const listener = getRequestListener(app.fetch);

async function one() {
  const { req, res } = exchange();
  const finished = new Promise((resolve) => res.once("finish", resolve));
  await listener(req, res);
  await finished;
  // What the server emits once the response is done; the middleware listens for it.
  res.emit("close");
}

// 64 requests in flight, as the HTTP scenario's 64 connections.
let left = Number(process.env.N ?? 10_000);
await Promise.all(
  Array.from({ length: 64 }, async () => {
    while (left-- > 0) await one();
  }),
);
