// Type-level tests: checked by `tsc --noEmit` inside `npm test`; at run time they only assert trivia.
import express from "express";
import { Hono, type MiddlewareHandler } from "hono";
import { Cluster, Redis } from "ioredis";
import { Valkey, Cluster as ValkeyCluster } from "iovalkey";
import { createClient, createCluster } from "redis";
import { createClient as createClient5, createCluster as createCluster5 } from "redis5";
import { describe, expectTypeOf, it } from "vitest";
import { lock as expressLock, semaphore as expressSemaphore } from "../../integrations/express/index.js";
import {
  type LeaseholdMiddleware as HonoMiddleware,
  lock as honoLock,
  semaphore as honoSemaphore,
  type LeaseholdVariables,
} from "../../integrations/hono/index.js";
import type { RequestLease } from "../../integrations/http/types.js";
import { Lease as LeaseParam } from "../../integrations/nestjs/index.js";
import {
  type CloseOptions,
  type Lease,
  type LockLease,
  lock,
  type RedisClient,
  redisStore,
  type SemaphoreLease,
  type SemaphoreNotAcquiredError,
  type StoreUnavailableError,
  semaphore,
} from "../../src/index.js";

describe("types", () => {
  it("engine", () => {
    // Type-checked, never run: these calls would take real permits.
    const checks = () => {
      const slots = semaphore({ limit: 2 });
      expectTypeOf(slots.acquire("k")).toEqualTypeOf<Promise<SemaphoreLease | null>>();
      expectTypeOf(slots.run("k", async () => 42)).toEqualTypeOf<Promise<number>>();
      expectTypeOf(slots.run("k", (lease) => lease.weight)).toEqualTypeOf<Promise<number>>();
      expectTypeOf(lock().acquire("k")).toEqualTypeOf<Promise<LockLease | null>>();
      expectTypeOf(slots.close({ graceMs: 1000 })).toEqualTypeOf<Promise<void>>();
      expectTypeOf(lock().close()).toEqualTypeOf<Promise<void>>();
      expectTypeOf(expressSemaphore("s", 1).close).toEqualTypeOf<(options?: CloseOptions) => Promise<void>>();
      // @ts-expect-error graceMs is a number of ms
      slots.close({ graceMs: "5s" });
      // @ts-expect-error limit is required
      semaphore({});
      // @ts-expect-error a lock has ttlMs, not leaseMs
      lock({ leaseMs: 5 });
    };
    expectTypeOf(checks).toBeFunction();
    expectTypeOf<SemaphoreLease>().toMatchTypeOf<Lease>();
    expectTypeOf<SemaphoreNotAcquiredError["limit"]>().toEqualTypeOf<number>();
    expectTypeOf<StoreUnavailableError["code"]>().toEqualTypeOf<string>();
  });

  it("clients: every library's client and cluster fits wherever a client goes, with no cast", () => {
    // Type-checked, never run: these would open connections.
    const checks = () => {
      expectTypeOf(new Redis()).toMatchTypeOf<RedisClient>();
      expectTypeOf(new Cluster([])).toMatchTypeOf<RedisClient>();
      expectTypeOf(new Valkey()).toMatchTypeOf<RedisClient>();
      expectTypeOf(new ValkeyCluster([])).toMatchTypeOf<RedisClient>();
      expectTypeOf(createClient()).toMatchTypeOf<RedisClient>();
      expectTypeOf(createCluster({ rootNodes: [] })).toMatchTypeOf<RedisClient>();
      expectTypeOf(createClient5()).toMatchTypeOf<RedisClient>();
      expectTypeOf(createCluster5({ rootNodes: [] })).toMatchTypeOf<RedisClient>();
      semaphore(createClient({ url: "redis://localhost" }), { limit: 1 });
      semaphore({ client: createCluster({ rootNodes: [] }), limit: 1 });
      semaphore({ client: createClient().connect(), limit: 1 });
      lock(createClient5());
      redisStore(createClient(), { timeoutMs: 500 });
      expressSemaphore("s", 2, { client: createClient() });
      // @ts-expect-error a URL is not a client
      semaphore("redis://localhost", { limit: 1 });
    };
    expectTypeOf(checks).toBeFunction();
  });

  it("Express: req.lease is typed by augmenting Request", () => {
    const app = express();
    app.get("/", expressSemaphore("s", 2), (req, res) => {
      expectTypeOf(req.lease).toEqualTypeOf<RequestLease | undefined>();
      res.end();
    });
    app.post("/:id", expressLock("l", { key: (req) => String(req.params.id) }), (_req, res) => res.end());
  });

  it("Hono: c.get('lease') is typed through the middleware, no casts", () => {
    const app = new Hono();
    app.get("/", honoSemaphore("s", 2), (c) => {
      expectTypeOf(c.get("lease")).toEqualTypeOf<SemaphoreLease | undefined>();
      return c.text("ok");
    });
    app.get("/l", honoLock("l"), (c) => {
      expectTypeOf(c.get("lease")).toEqualTypeOf<LockLease | undefined>();
      return c.text("ok");
    });
  });

  it("Hono: LeaseholdVariables types c.get('lease') on an app whose middleware is installed with app.use", () => {
    const app = new Hono<{ Variables: LeaseholdVariables<SemaphoreLease> }>();
    app.use("/chat/*", honoSemaphore("s", 2));
    app.post("/chat/complete", (c) => {
      expectTypeOf(c.get("lease")).toEqualTypeOf<SemaphoreLease | undefined>();
      return c.text("ok");
    });
    expectTypeOf<LeaseholdVariables>().toEqualTypeOf<{ lease: RequestLease | undefined }>();
    expectTypeOf<LeaseholdVariables<LockLease>["lease"]>().toEqualTypeOf<LockLease | undefined>();
    // What the middleware declares is the same type, so the two never disagree.
    expectTypeOf(honoLock("l")).toEqualTypeOf<HonoMiddleware<LockLease>>();
    expectTypeOf(honoLock("l")).toMatchTypeOf<MiddlewareHandler<{ Variables: LeaseholdVariables<LockLease> }>>();
    expectTypeOf(honoLock("l").close).toEqualTypeOf<(options?: CloseOptions) => Promise<void>>();
  });

  it("NestJS: @Lease() is a parameter decorator", () => {
    expectTypeOf(LeaseParam()).toEqualTypeOf<ParameterDecorator>();
  });
});
