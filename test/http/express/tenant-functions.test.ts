// Express tenant functions that throw or return a non-string, and a weight above the tenant's
// cap: each takes the error path, with nothing taken and no hang, on both stores.
import type { AddressInfo } from "node:net";
import express, { type NextFunction, type Request, type Response } from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { semaphore } from "../../../integrations/express/index.js";
import { semaphore as core, memoryStore, redisStore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { newRedis } from "../../support/redis.js";

const STORES: { name: string; make: () => Store }[] = [
  { name: "memory", make: () => memoryStore() },
  { name: "redis", make: () => redisStore(newRedis()) },
];

describe.each(STORES)("express tenants, odd functions ($name)", ({ make }) => {
  it("throwing tenant, non-string tenant, weight above the tenant's cap: error path, nothing taken, no hang", async () => {
    const client = make();
    const name = `tenantfn${Math.random().toString(36).slice(2, 8)}`;
    const app = express();
    const ok = (_req: Request, res: Response) => res.json({ ok: true });
    app.get(
      "/throws",
      semaphore(`${name}a`, 3, {
        client,
        tenant: () => {
          throw new Error("boom");
        },
        tenantLimit: 1,
      }),
      ok,
    );
    app.get("/number", semaphore(`${name}b`, 3, { client, tenant: (() => 42) as never, tenantLimit: 1 }), ok);
    // weight 2 over tenantLimit 1, both numbers: refused at creation
    expect(() => semaphore(`${name}c`, 3, { client, tenant: () => "acme", tenantLimit: 1, weight: 2 })).toThrow(/weight/);
    app.get("/heavyfn", semaphore(`${name}d`, 3, { client, tenant: () => "acme", tenantLimit: () => 1, weight: () => 3 }), ok);
    app.use((error: Error, _req: Request, res: Response, _next: NextFunction) => {
      res.status(500).json({ error: error.name, message: error.message });
    });
    const server = app.listen(0);
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const answers = await Promise.all(["/throws", "/number", "/heavyfn"].map((p) => request(url).get(p)));
      for (const a of answers) {
        expect(a.status).toBe(500);
      }
      expect(answers.map((a) => a.body.error)).toEqual(["Error", "ValidationError", "ValidationError"]);
      const slots = core({ client, limit: 3 });
      for (const s of ["a", "b", "d"]) expect(await slots.stats(`${name}${s}`)).toMatchObject({ used: 0, waiting: 0 });
    } finally {
      server.close();
    }
  });
});
