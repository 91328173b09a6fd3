// The Fastify adapter (issue #29) where Fastify differs from the other frameworks: fastify.inject,
// reply.hijack(), reply.send(stream), callback handlers, leasehold's own errors never reaching the
// app's error handler, and handlers failing after their response started.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { PassThrough, Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type LeaseholdHook, PROBLEM_TYPES, semaphore } from "../../../integrations/fastify/index.js";
import {
  CHANNELS,
  ClientAbortedError,
  semaphore as engineSemaphore,
  type LostEvent,
  type ReleasedEvent,
  SemaphoreLeaseLostError,
  ShutdownError,
} from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { eventually, spyStore } from "../../support/stores.js";
import { listenFastify } from "../fastify-app.js";
import { bothStores } from "../frameworks.js";
import { Control, getOnce, type RunningApp } from "../harness.js";

const id = (request: FastifyRequest) => String(request.headers["x-id"] ?? "anonymous");

/** The `lost` and `released` events of each lease id, in order. */
function leaseEvents() {
  const seen: { type: "lost" | "released"; id: string }[] = [];
  const lost = (event: unknown) => seen.push({ type: "lost", id: (event as LostEvent).id });
  const released = (event: unknown) => seen.push({ type: "released", id: (event as ReleasedEvent).id });
  subscribe(CHANNELS.lost, lost);
  subscribe(CHANNELS.released, released);
  return {
    of: (key: string) => seen.filter((event) => event.id === key).map((event) => event.type),
    stop: () => {
      unsubscribe(CHANNELS.lost, lost);
      unsubscribe(CHANNELS.released, released);
    },
  };
}

describe.each(bothStores)("Fastify on the $name store", ({ make }) => {
  let store: Store;
  let calls: ReturnType<typeof spyStore>["calls"];
  let control: Control;
  let events: ReturnType<typeof leaseEvents>;
  let app: FastifyInstance;
  let running: RunningApp | undefined;
  /** What reached the app's error handler. */
  let errors: unknown[];
  const count = (key: string) => engineSemaphore({ client: store, limit: 1 }).count(key);
  /** Every permit taken was returned exactly once (`refused`: acquires that took nothing). */
  const balanced = async (refused = 0) => {
    await eventually(() => calls.semaphoreRelease === calls.semaphoreAcquire - refused);
    expect(calls.semaphoreRelease).toBe(calls.semaphoreAcquire - refused);
  };
  /** What happened to the leases of `key`, once `n` events were published. */
  const eventsOf = async (key: string, n = 1) => {
    await eventually(() => events.of(key).length >= n);
    return events.of(key);
  };

  beforeEach(() => {
    const raw = make();
    const spied = spyStore(raw, {}, 2_000);
    store = spied.store;
    calls = spied.calls;
    control = new Control(store, raw);
    events = leaseEvents();
    errors = [];
    app = Fastify();
    app.setErrorHandler((error: Error, _request, reply) => {
      errors.push(error);
      reply.code(500).send({ error: error.name, message: error.message });
    });
  });

  afterEach(async () => {
    events.stop();
    control.openAll();
    if (running !== undefined) await running.close();
    else await app.close();
    running = undefined;
  });

  const serve = async () => {
    running = await listenFastify(app);
    return running.url;
  };

  it("works under fastify.inject: admits, refuses with problem+json and Retry-After, and releases once", async () => {
    app.get("/", { onRequest: semaphore("inject", 1, { client: store }) }, async (request) => {
      await control.hold(id(request));
      return { key: request.lease?.key };
    });
    const first = app.inject({ method: "GET", url: "/", headers: { "x-id": "1" } });
    await eventually(() => control.entered.includes("1"));
    const refused = await app.inject({ method: "GET", url: "/", headers: { "x-id": "2" } });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers["content-type"]).toContain("application/problem+json");
    expect(refused.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
    expect(refused.json()).toMatchObject({ type: PROBLEM_TYPES["semaphore-full"], key: "inject", limit: 1 });
    expect(await count("inject")).toBe(1);
    control.open("1");
    expect((await first).json()).toEqual({ key: "inject" });
    await eventually(async () => (await count("inject")) === 0);
    await balanced(1);
    expect(await eventsOf("inject")).toEqual(["released"]);
  });

  it("a hijacked reply keeps its permit until the handler ends reply.raw", async () => {
    app.get("/", { onRequest: semaphore("hijack", 1, { client: store }) }, async (request, reply) => {
      reply.hijack();
      reply.raw.writeHead(200, { "content-type": "text/plain" });
      reply.raw.write("first\n");
      await control.hold(id(request));
      reply.raw.end("second\n");
    });
    const url = await serve();
    const streaming = getOnce(`${url}/`);
    await eventually(() => control.entered.includes("anonymous"));
    expect(await count("hijack")).toBe(1);
    expect((await getOnce(`${url}/`).answer).status).toBe(503);
    control.open("anonymous");
    const answer = await streaming.answer;
    expect(answer).toMatchObject({ status: 200, body: "first\nsecond\n", complete: true });
    await eventually(async () => (await count("hijack")) === 0);
    await balanced(1);
    expect(await eventsOf("hijack")).toEqual(["released"]);
  });

  it("a stream sent with reply.send(stream) keeps its permit to its last byte, under inject too", async () => {
    app.get("/", { onRequest: semaphore("stream", 1, { client: store }) }, (request, reply) => {
      const body = new PassThrough();
      body.write("first\n");
      void control.hold(id(request)).then(() => body.end("second\n"));
      reply.send(body);
    });
    const answer = app.inject({ method: "GET", url: "/" });
    await eventually(() => control.entered.includes("anonymous"));
    await sleep(50);
    expect(await count("stream")).toBe(1);
    control.open("anonymous");
    expect((await answer).body).toBe("first\nsecond\n");
    await eventually(async () => (await count("stream")) === 0);
    await balanced();
  });

  it("a callback handler (no promise) keeps its permit until it sends", async () => {
    app.get("/", { onRequest: semaphore("callback", 1, { client: store }) }, function handler(request, reply) {
      void control.hold(id(request)).then(() => reply.send({ done: true }));
    });
    const url = await serve();
    const pending = getOnce(`${url}/`);
    await eventually(() => control.entered.includes("anonymous"));
    await sleep(50);
    expect(await count("callback")).toBe(1);
    control.open("anonymous");
    expect((await pending.answer).status).toBe(200);
    await eventually(async () => (await count("callback")) === 0);
    await balanced();
    expect(await eventsOf("callback")).toEqual(["released"]);
  });

  describe("leasehold's own errors, rethrown by a handler, never reach the app's error handler", () => {
    const stopping = async (request: FastifyRequest) => {
      control.watch(id(request), request.lease);
      control.entered.push(id(request));
      // What a handler that passes its signal on does: the rejection is an AbortError caused by it.
      await sleep(60_000, undefined, { signal: request.lease?.signal });
      return { finished: true };
    };

    it("a shutdown is answered 503 shutting-down", async () => {
      const guard: LeaseholdHook = semaphore("own-shutdown", 1, { client: store });
      app.get("/", { onRequest: guard }, stopping);
      const answer = app.inject({ method: "GET", url: "/", headers: { "x-id": "s" } });
      await eventually(() => control.entered.includes("s"));
      const closed = guard.close({ graceMs: 10_000 });
      const res = await answer;
      expect(res.statusCode).toBe(503);
      expect(res.headers["content-type"]).toContain("application/problem+json");
      expect(res.json()).toMatchObject({ type: PROBLEM_TYPES["shutting-down"] });
      expect(control.reasons.get("s")).toBeInstanceOf(ShutdownError);
      await closed;
      expect(errors).toEqual([]);
      await balanced();
      expect(await eventsOf("own-shutdown")).toEqual(["released"]);
    });

    it("a client that left gets nothing, and its permit returns when the handler stops, with no loss", async () => {
      app.get("/", { onRequest: semaphore("own-gone", 1, { client: store, disconnectGraceMs: 60_000 }) }, stopping);
      const url = await serve();
      const gone = getOnce(`${url}/`);
      await eventually(() => control.entered.includes("anonymous"));
      gone.leave();
      await eventually(() => control.reasons.has("anonymous"));
      expect(control.reasons.get("anonymous")).toBeInstanceOf(ClientAbortedError);
      await eventually(async () => (await count("own-gone")) === 0);
      expect(errors).toEqual([]);
      await balanced();
      expect(await eventsOf("own-gone")).toEqual(["released"]);
    });

    it("a lost lease is answered 503 lease-lost", async () => {
      app.get("/", { onRequest: semaphore("own-lost", 1, { client: store, heartbeatMs: 20 }) }, async (request) => {
        control.watch(id(request), request.lease);
        await control.steal(request.lease!);
        await sleep(60_000, undefined, { signal: request.lease?.signal });
      });
      const res = await app.inject({ method: "GET", url: "/" });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ type: PROBLEM_TYPES["lease-lost"], key: "own-lost" });
      expect(control.reasons.get("anonymous")).toBeInstanceOf(SemaphoreLeaseLostError);
      expect(errors).toEqual([]);
      await balanced();
    });

    it("any other error goes to the app's error handler unchanged", async () => {
      app.get("/", { onRequest: semaphore("other", 1, { client: store }) }, async () => {
        throw Object.assign(new Error("upstream failed"), { name: "UpstreamError" });
      });
      const res = await app.inject({ method: "GET", url: "/" });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ error: "UpstreamError", message: "upstream failed" });
      expect(errors).toHaveLength(1);
      await balanced();
      expect(await eventsOf("other")).toEqual(["released"]);
    });
  });

  describe("a handler failing after its response started returns its permit at once, with no false loss", () => {
    const serveFailing = async (name: string, handler: (request: FastifyRequest, reply: FastifyReply) => unknown) => {
      app.get("/", { onRequest: semaphore(name, 1, { client: store, disconnectGraceMs: 60_000 }) }, handler as never);
      return serve();
    };

    it("a hijacked reply: the failure is heard though Fastify only logs it", async () => {
      const url = await serveFailing("hijacked-fails", async (request, reply) => {
        reply.hijack();
        reply.raw.writeHead(200, { "content-type": "text/plain" });
        reply.raw.write("first\n");
        await control.hold(id(request));
        throw new Error("failed mid-body");
      });
      const client = getOnce(`${url}/`);
      await eventually(() => control.entered.includes("anonymous"));
      expect(await count("hijacked-fails")).toBe(1);
      control.open("anonymous");
      // The client is still connected: only the handler's failure can have freed the permit.
      await eventually(async () => (await count("hijacked-fails")) === 0);
      expect(await eventsOf("hijacked-fails")).toEqual(["released"]);
      client.leave();
      expect((await client.answer).complete).toBe(false);
      await balanced();
      expect(await eventsOf("hijacked-fails")).toEqual(["released"]);
    });

    it("a body written on reply.raw, then a throw: the app's error handler hears it, the permit returns", async () => {
      const url = await serveFailing("raw-fails", async (request, reply) => {
        reply.raw.writeHead(200, { "content-type": "text/plain" });
        reply.raw.write("first\n");
        await control.hold(id(request));
        throw new Error("failed mid-body");
      });
      const client = getOnce(`${url}/`);
      await eventually(() => control.entered.includes("anonymous"));
      control.open("anonymous");
      const answer = await client.answer;
      expect(answer.body.startsWith("first\n")).toBe(true);
      await eventually(async () => (await count("raw-fails")) === 0);
      await balanced();
      expect(await eventsOf("raw-fails")).toEqual(["released"]);
      expect(errors).toHaveLength(1);
    });

    it("a stream sent with reply.send(stream) that fails mid-body: the response is cut, the permit returns", async () => {
      const url = await serveFailing("stream-fails", (request, reply) => {
        const body = new Readable({ read() {} });
        body.push("first\n");
        void control.hold(id(request)).then(() => body.destroy(new Error("source failed")));
        reply.send(body);
      });
      const client = getOnce(`${url}/`);
      await eventually(() => control.entered.includes("anonymous"));
      control.open("anonymous");
      const answer = await client.answer;
      expect(answer).toMatchObject({ status: 200, body: "first\n", complete: false });
      await eventually(async () => (await count("stream-fails")) === 0);
      await balanced();
      expect(await eventsOf("stream-fails")).toEqual(["released"]);
    });
  });
});
