// The Fastify plugin (issue #29): `app.register(leasehold, { client })` gives every hook made
// through `app.leasehold` the plugin's options as defaults, and `app.close()` closes them.
import { setTimeout as sleep } from "node:timers/promises";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { leasehold, PROBLEM_TYPES } from "../../../integrations/fastify/index.js";
import { memoryStore, ShutdownError, semaphore, ValidationError } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { eventually } from "../../support/stores.js";

describe("the leasehold plugin", () => {
  let app: FastifyInstance;

  afterEach(async () => {
    await app.close();
  });

  it("gives its client and prefix to every hook made through app.leasehold; a route's own options win", async () => {
    const store: Store = memoryStore();
    app = Fastify();
    await app.register(leasehold, { client: store, prefix: "shared", exposeFence: true });
    let entered = 0;
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    app.get("/chat", { onRequest: app.leasehold.semaphore("chat", 1) }, async (request) => {
      entered++;
      await opened;
      return { key: request.lease?.key };
    });
    app.get("/plain", { onRequest: app.leasehold.lock("plain", { exposeFence: false }) }, async () => ({ ok: true }));
    const first = app.inject({ method: "GET", url: "/chat" });
    await eventually(() => entered === 1);
    // Held in the plugin's store, under its prefix.
    expect(await semaphore({ client: store, limit: 1, prefix: "shared" }).count("chat")).toBe(1);
    expect(await semaphore({ client: store, limit: 1 }).count("chat")).toBe(0);
    const refused = await app.inject({ method: "GET", url: "/chat" });
    expect(refused.statusCode).toBe(503);
    open();
    const admitted = await first;
    expect(admitted.json()).toEqual({ key: "chat" });
    expect(admitted.headers["lease-fence"]).toMatch(/^\d+$/);
    const plain = await app.inject({ method: "GET", url: "/plain" });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers["lease-fence"]).toBeUndefined();
  });

  it("app.close() tells requests in flight (ShutdownError), answers them 503 shutting-down, and frees every permit", async () => {
    const store: Store = memoryStore();
    app = Fastify();
    await app.register(leasehold, { client: store, shutdownGraceMs: 10_000 });
    const reasons: unknown[] = [];
    app.get("/work", { onRequest: app.leasehold.semaphore("work", 2) }, async (request) => {
      const signal = request.lease?.signal;
      signal?.addEventListener("abort", () => reasons.push(signal.reason), { once: true });
      await sleep(60_000, undefined, { signal });
      return { finished: true };
    });
    await app.listen({ port: 0, host: "127.0.0.1" });
    const { port } = app.server.address() as { port: number };
    const inFlight = fetch(`http://127.0.0.1:${port}/work`);
    await eventually(async () => (await semaphore({ client: store, limit: 2 }).count("work")) === 1);
    const closing = app.close();
    const answer = await inFlight;
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({ type: PROBLEM_TYPES["shutting-down"] });
    expect(reasons).toEqual([expect.any(ShutdownError)]);
    await closing;
    expect(await semaphore({ client: store, limit: 2 }).count("work")).toBe(0);
  });

  it("refuses an unknown option, naming it, when the app starts", async () => {
    app = Fastify();
    app.register(leasehold, { clinet: memoryStore() } as never);
    await expect(app.ready()).rejects.toThrow(ValidationError);
    await expect(app.ready()).rejects.toThrow(/clinet/);
  });

  it("refuses a bad value of a default, naming it, when the app starts", async () => {
    app = Fastify();
    app.register(leasehold, { onStoreError: "open" as never });
    await expect(app.ready()).rejects.toThrow(/`onStoreError` must be "fail-closed" or "fail-open"/);
  });

  it("refuses a bad route option made through app.leasehold when the route is declared", async () => {
    app = Fastify();
    await app.register(leasehold, {});
    expect(() => app.leasehold.semaphore("x", 0)).toThrow(ValidationError);
  });
});
