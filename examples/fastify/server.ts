// npm run example:fastify — a chat route limited to 2 calls in flight per tenant, and an order
// route that one request at a time may pay, both through the leasehold plugin's shared defaults.
// In your app, import from "leasehold/fastify".
import { setTimeout as sleep } from "node:timers/promises";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { leasehold } from "../../integrations/fastify/index.js";
import { exampleClient, port } from "../client.js";

export async function createApp(client = exampleClient().client): Promise<FastifyInstance> {
  const app = Fastify();
  // The client once; `app.close()` then tells requests in flight and waits up to 5 s for their permits.
  await app.register(leasehold, { client, shutdownGraceMs: 5_000 });
  const tenant = (req: FastifyRequest) => (req.headers["x-tenant-id"] as string | undefined) ?? "anonymous";

  app.post("/chat", { onRequest: app.leasehold.semaphore("chat", 2, { key: tenant }) }, async (request) => {
    // A slow upstream call: it keeps its permit, and stops if the permit is lost or the client leaves
    // (the rejection is leasehold's own reason: answered as documented, never a 500).
    await sleep(2_000, undefined, { signal: request.lease?.signal });
    return { answer: "42", key: request.lease?.key };
  });

  app.post(
    "/orders/:id/pay",
    { onRequest: app.leasehold.lock("order", { key: (req) => (req.params as { id: string }).id }) },
    async (request) => {
      await sleep(1_000, undefined, { signal: request.lease?.signal });
      return { paid: (request.params as { id: string }).id };
    },
  );
  return app;
}

export async function start(listenPort = port()): Promise<FastifyInstance> {
  const { client, label } = exampleClient();
  const app = await createApp(client);
  await app.listen({ port: listenPort });
  console.log(`Fastify example on http://localhost:${listenPort}, leases on ${label}`);
  console.log(`  try: for i in 1 2 3; do curl -s -XPOST -H 'x-tenant-id: acme' localhost:${listenPort}/chat & done; wait`);
  process.once("SIGTERM", () => void app.close());
  return app;
}

if (import.meta.url === `file://${process.argv[1]}`) void start();
