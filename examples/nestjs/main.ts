// npm run example:nestjs — the same routes as NestJS decorators, on the Express platform.
// In your app, import from "leasehold/nestjs".
import "reflect-metadata";
import { Controller, HttpCode, Module, Param, Post, Req } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import {
  Lease,
  LeaseholdModule,
  Lock,
  type LockLease,
  type NestRequest,
  Semaphore,
  type SemaphoreLease,
} from "../../integrations/nestjs/index.js";
import { exampleClient, port } from "../client.js";

const tenant = (req: NestRequest): string => req.headers["x-tenant-id"] ?? "anonymous";

@Controller()
class ExampleController {
  @Post("chat")
  @HttpCode(200)
  @Semaphore("chat", 2, { key: tenant })
  async chat(@Lease() lease: SemaphoreLease) {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    return { answer: "42", key: lease.key };
  }

  @Post("orders/:id/pay")
  @HttpCode(200)
  @Lock("order", { key: (req) => String(req.params.id) })
  async pay(@Param("id") id: string, @Lease() _lease: LockLease, @Req() _req: NestRequest) {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return { paid: id };
  }
}

export function createModule(client = exampleClient().client) {
  @Module({ imports: [LeaseholdModule.forRoot({ client })], controllers: [ExampleController] })
  class AppModule {}
  return AppModule;
}

export async function start(listenPort = port()) {
  const { client, label } = exampleClient();
  const app = await NestFactory.create(createModule(client), { logger: ["error", "warn"] });
  await app.listen(listenPort);
  console.log(`NestJS example on http://localhost:${listenPort}, leases on ${label}`);
  console.log(`  try: for i in 1 2 3; do curl -s -XPOST -H 'x-tenant-id: acme' localhost:${listenPort}/chat & done; wait`);
  return app;
}

if (import.meta.url === `file://${process.argv[1]}`) await start();
