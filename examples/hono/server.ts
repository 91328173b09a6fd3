// npm run example:hono — the same two routes on Hono, served by @hono/node-server.
// In your app, import from "leasehold/hono".
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { streamSSE } from "hono/streaming";
import { lock, semaphore } from "../../integrations/hono/index.js";
import { exampleClient, port } from "../client.js";

export function createApp(client = exampleClient().client): Hono {
  const app = new Hono();

  // Streams keep their permit until the last event is written.
  app.get("/chat", semaphore("chat", 2, { client, key: (c) => c.req.header("x-tenant-id") ?? "anonymous" }), (c) =>
    streamSSE(c, async (stream) => {
      const signal = c.get("lease")?.signal;
      for (const word of ["leases", "keep", "their", "slots"]) {
        if (signal?.aborted) return;
        await stream.writeSSE({ data: word });
        await stream.sleep(500);
      }
    }),
  );

  // A middleware does not know its route's path, so Hono types the parameter as possibly undefined; here it is always there.
  app.post("/orders/:id/pay", lock("order", { client, key: (c) => c.req.param("id")! }), async (c) => {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return c.json({ paid: c.req.param("id") });
  });

  // Refusals are HTTPExceptions carrying a problem+json response.
  app.onError((error, c) => (error instanceof HTTPException ? error.getResponse() : c.text("internal error", 500)));
  return app;
}

export function start(listenPort = port()) {
  const { client, label } = exampleClient();
  const server = serve({ fetch: createApp(client).fetch, port: listenPort });
  console.log(`Hono example on http://localhost:${listenPort}, leases on ${label}`);
  console.log(`  try: for i in 1 2 3; do curl -sN -H 'x-tenant-id: acme' localhost:${listenPort}/chat & done; wait`);
  return server;
}

if (import.meta.url === `file://${process.argv[1]}`) start();
