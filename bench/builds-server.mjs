// A Hono server over one build of leasehold, for bench/builds.mjs: DIST (a dist/ directory), PORTS
// (memory,redis), REDIS_URL. The route holds its permit for HANDLER_MS (20) with LIMIT (10) permits,
// so most requests of a load with more connections than permits are refused: what a refusal costs.
import { createAdaptorServer } from "@hono/node-server";
import { Hono } from "hono";
import { Redis } from "ioredis";

const dist = process.env.DIST;
const { semaphore } = await import(`${dist}/esm/integrations/hono/index.js`);
const { memoryStore } = await import(`${dist}/esm/src/index.js`);
const [memoryPort, redisPort] = (process.env.PORTS ?? "").split(",").map(Number);
const limit = Number(process.env.LIMIT ?? 10);
const handlerMs = Number(process.env.HANDLER_MS ?? 20);
const redis = new Redis(process.env.REDIS_URL);

function serve(client, port, name) {
  const app = new Hono();
  app.get("/", semaphore(name, limit, { client }), async (c) => {
    await new Promise((resolve) => setTimeout(resolve, handlerMs));
    return c.json({ ok: true });
  });
  app.onError((error, c) => ("getResponse" in error ? error.getResponse() : c.text("error", 500)));
  return new Promise((resolve) => createAdaptorServer({ fetch: app.fetch }).listen(port, "127.0.0.1", resolve));
}

await serve(memoryStore(), memoryPort, `builds-${process.pid}-memory`);
await serve(redis, redisPort, `builds-${process.pid}-redis`);
process.on("SIGINT", () => process.exit(0));
console.log("listening");
