import "reflect-metadata";
import { NestFactory } from "@nestjs/core";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { createApp as expressApp } from "../../examples/express/server.js";
import { createApp as fastifyApp } from "../../examples/fastify/server.js";
import { createApp as honoApp } from "../../examples/hono/server.js";
import { createModule } from "../../examples/nestjs/main.js";
import { fairShares } from "../../examples/tenants/fair-shares.js";
import { type ClientInput, memoryStore } from "../../src/index.js";
import { newRedis } from "../support/redis.js";

// The examples run as documented: two chat calls per tenant in flight, the third refused at once.
describe("examples", () => {
  it("Express: the third concurrent chat of a tenant is refused with 503", async () => {
    const app = expressApp(memoryStore());
    const server = app.listen(0);
    try {
      const calls = [1, 2, 3].map(() =>
        request(server)
          .post("/chat")
          .set("x-tenant-id", "acme")
          .then((res) => res.status),
      );
      expect((await Promise.all(calls)).sort()).toEqual([200, 200, 503]);
    } finally {
      server.close();
    }
  });

  it("Fastify: the third concurrent chat of a tenant is refused with 503, and the order lock admits one payment", async () => {
    const app = await fastifyApp(memoryStore());
    try {
      const chats = [1, 2, 3].map(() =>
        app.inject({ method: "POST", url: "/chat", headers: { "x-tenant-id": "acme" } }).then((res) => res.statusCode),
      );
      const payments = [1, 2].map(() => app.inject({ method: "POST", url: "/orders/7/pay" }).then((res) => res.statusCode));
      expect((await Promise.all(chats)).sort()).toEqual([200, 200, 503]);
      expect((await Promise.all(payments)).sort()).toEqual([200, 409]);
    } finally {
      await app.close();
    }
  });

  it("Hono: SSE chat streams to two tenants' callers and refuses the third", async () => {
    const app = honoApp(memoryStore());
    const call = async () => {
      const res = await app.request("/chat", { headers: { "x-tenant-id": "acme" } });
      return [res.status, await res.text()] as const;
    };
    const calls = [call(), call(), call()];
    const results = await Promise.all(calls);
    expect(results.map(([status]) => status).sort()).toEqual([200, 200, 503]);
    expect(results.find(([status]) => status === 200)?.[1]).toContain("data: slots");
  });

  it("NestJS: the order lock admits one payment at a time", async () => {
    const app = await NestFactory.create(createModule(memoryStore()), { logger: false });
    await app.init();
    try {
      const server = app.getHttpServer();
      const calls = [1, 2].map(() =>
        request(server)
          .post("/orders/7/pay")
          .then((res) => res.status),
      );
      expect((await Promise.all(calls)).sort()).toEqual([200, 409]);
    } finally {
      await app.close();
    }
  });

  it.each([
    ["the embedded store", () => memoryStore()],
    ["Redis", () => newRedis()],
  ] as [string, () => ClientInput][])(
    "fair shares for tenants, on %s: both bounds hold, and globex is served in turn",
    async (_, client) => {
      const outcome = await fairShares(client(), () => {});
      expect(outcome.peak).toBe(4);
      expect(outcome.peakPerTenant).toMatchObject({ acme: 3 });
      expect(Math.max(...Object.values(outcome.peakPerTenant))).toBe(3);
      expect(outcome.refusedAs).toBe("tenant-full");
      // At once beside acme's batch; then, with 15 calls waiting, within one turn of the two other tenants.
      expect(outcome.globexWaitedBehind[0]).toBe(0);
      expect(outcome.globexWaitedBehind[1]).toBeLessThanOrEqual(2);
    },
  );
});
