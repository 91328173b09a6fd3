// npm run example:express — a chat route limited to 2 calls in flight per tenant,
// and an order route that one request at a time may pay.
// In your app, import from "leasehold/express".
import type { Server } from "node:http";
import express from "express";
import { lock, semaphore } from "../../integrations/express/index.js";
import { exampleClient, port } from "../client.js";

export function createApp(client = exampleClient().client): express.Express {
  const app = express();
  const tenant = (req: express.Request) => req.get("x-tenant-id") ?? "anonymous";

  app.post("/chat", semaphore("chat", 2, { client, key: tenant }), async (req, res) => {
    // A slow upstream call: it keeps its permit, and stops if the permit is lost or the client leaves.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Stopping: end the response all the same, which is how Express tells the adapter the work is done
    // (otherwise a departed client's permit stays taken until disconnectGraceMs, reported as lost).
    if (req.lease?.signal.aborted) return void res.end();
    res.json({ answer: "42", key: req.lease?.key });
  });

  app.post("/orders/:id/pay", lock("order", { client, key: (req) => String(req.params.id) }), async (req, res) => {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    res.json({ paid: req.params.id });
  });
  return app;
}

export function start(listenPort = port()): Server {
  const { client, label } = exampleClient();
  return createApp(client).listen(listenPort, () => {
    console.log(`Express example on http://localhost:${listenPort}, leases on ${label}`);
    console.log(`  try: for i in 1 2 3; do curl -s -XPOST -H 'x-tenant-id: acme' localhost:${listenPort}/chat & done; wait`);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) start();
