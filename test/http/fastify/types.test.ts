// Type-level checks of leasehold/fastify (issue #29), by `tsc --noEmit` and at run time: the hooks
// fit a route's `onRequest` whatever the route's generics, and `request.lease` is typed by
// declaration merging.
import Fastify, { type FastifyRequest } from "fastify";
import { describe, expect, expectTypeOf, it } from "vitest";
import { type LeaseholdHook, lock, type RequestLease, semaphore } from "../../../integrations/fastify/index.js";
import { memoryStore } from "../../../src/index.js";

describe("leasehold/fastify types", () => {
  it("request.lease is the request's lease, or undefined", () => {
    expectTypeOf<FastifyRequest["lease"]>().toEqualTypeOf<RequestLease | undefined>();
  });

  it("a hook fits a route with its own generics, a schema, and an array of hooks", async () => {
    const app = Fastify();
    const client = memoryStore();
    const guard: LeaseholdHook = lock("typed", { client, key: (req) => (req.params as { id: string }).id });
    app.post<{ Params: { id: string }; Body: { amount: number } }>(
      "/orders/:id",
      {
        schema: { params: { type: "object", properties: { id: { type: "string" } }, required: ["id"] } },
        onRequest: [semaphore("typed-all", 2, { client }), guard],
      },
      async (request) => {
        expectTypeOf(request.params.id).toEqualTypeOf<string>();
        return { id: request.params.id, key: request.lease?.key };
      },
    );
    const res = await app.inject({ method: "POST", url: "/orders/7", payload: { amount: 1 } });
    expect(res.json()).toEqual({ id: "7", key: "typed:7" });
    await app.close();
  });
});
