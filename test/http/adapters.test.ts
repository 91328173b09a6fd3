import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer, request as httpRequest } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import express from "express";
import Fastify, { type FastifyRequest } from "fastify";
import { type Context, Hono } from "hono";
import type { HTTPException } from "hono/http-exception";
import { Redis } from "ioredis";
import request from "supertest";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { lock as expressLock, semaphore as expressSemaphore } from "../../integrations/express/index.js";
import { lock as fastifyLock, semaphore as fastifySemaphore } from "../../integrations/fastify/index.js";
import { lock as honoLock, semaphore as honoSemaphore } from "../../integrations/hono/index.js";
import { Semaphore } from "../../integrations/nestjs/index.js";
import {
  CHANNELS,
  ClientAbortedError,
  type HttpRejectedEvent,
  type LostEvent,
  memoryStore,
  type ReleasedEvent,
  redisStore,
  SemaphoreLeaseLostError,
  StoreUnavailableError,
  semaphore,
  ValidationError,
} from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { freePort } from "../support/redis-server.js";
import { eventually, gate, spyStore, storesUnderTest } from "../support/stores.js";
import { harnesses } from "./frameworks.js";
import { Control, type Harness, pause, type RunningApp } from "./harness.js";

/**
 * The stores each framework runs over. Every framework meets the memory store and Redis
 * through ioredis; the other clients' store paths run under two frameworks (Express 5, and
 * NestJS on Fastify: a middleware and a guard with an interceptor), because what a client
 * changes is below the adapters, and the conformance suite runs it over every client. This
 * keeps the file's time near what it was with two stores.
 */
const EVERY_CLIENT = new Set(["Express 5", "NestJS (fastify)"]);
const storesFor = (harness: Harness) =>
  storesUnderTest.filter((store) => store.name === "memory" || store.name === "ioredis" || EVERY_CLIENT.has(harness.name));

/** Reads a streamed response chunk by chunk, over a socket the test can cut. */
function openStream(url: string, headers: Record<string, string>) {
  const chunks: string[] = [];
  let ended = false;
  let failed = false;
  const req = httpRequest(url, { headers });
  req.on("response", (res) => {
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => chunks.push(chunk));
    res.on("end", () => {
      ended = true;
    });
    res.on("error", () => {
      failed = true;
    });
    res.on("aborted", () => {
      failed = true;
    });
  });
  req.on("error", () => {
    failed = true;
  });
  req.end();
  return {
    chunks,
    text: () => chunks.join(""),
    ended: () => ended,
    failed: () => failed,
    cut: () => req.destroy(),
  };
}

/** The `lost` and `released` diagnostics events, in the order they were published, and the adapters' refusals. */
function leaseEvents() {
  const events: ({ type: "lost"; event: LostEvent } | { type: "released"; event: ReleasedEvent })[] = [];
  const refusals: HttpRejectedEvent[] = [];
  const onLost = (event: unknown) => events.push({ type: "lost", event: event as LostEvent });
  const onReleased = (event: unknown) => events.push({ type: "released", event: event as ReleasedEvent });
  const onRejected = (event: unknown) => refusals.push(event as HttpRejectedEvent);
  subscribe(CHANNELS.lost, onLost);
  subscribe(CHANNELS.released, onReleased);
  subscribe(CHANNELS.httpRejected, onRejected);
  return {
    /** What happened to the leases of `id`: "lost" / "released" in order. */
    of: (id: string) => events.filter(({ event }) => event.id === id),
    /** The reasons the adapters gave for refusing requests to `id`, in order. */
    refusedFor: (id: string) => refusals.filter((event) => event.id === id).map((event) => event.reason),
    stop: () => {
      unsubscribe(CHANNELS.lost, onLost);
      unsubscribe(CHANNELS.released, onReleased);
      unsubscribe(CHANNELS.httpRejected, onRejected);
    },
  };
}

describe.each(harnesses)("$name adapter", (harness) => {
  describe.each(storesFor(harness))("on the $name store", ({ make }) => {
    let store: Store;
    let calls: ReturnType<typeof spyStore>["calls"];
    let control: Control;
    let app: RunningApp;
    /** Acquires the test expects to be refused (they take nothing, so they release nothing). */
    let refusals = 0;
    let events: ReturnType<typeof leaseEvents>;
    const count = (id: string) => semaphore({ client: store, limit: 1 }).count(id);
    const get = (path: string, headers: Record<string, string> = {}) => {
      let pending = request(app.url).get(path);
      for (const [name, value] of Object.entries(headers)) pending = pending.set(name, value);
      return pending;
    };

    beforeEach(async () => {
      refusals = 0;
      const raw = make();
      const spied = spyStore(raw, {}, 2_000);
      store = spied.store;
      calls = spied.calls;
      control = new Control(store, raw);
      events = leaseEvents();
      app = await harness.start(store, control);
    });

    afterEach(async () => {
      events.stop();
      control.openAll();
      await app.close();
    });

    /** Every permit taken was returned exactly once. */
    const releasedExactlyOnce = async () => {
      await eventually(
        () => calls.semaphoreRelease + calls.lockRelease === calls.semaphoreAcquire + calls.lockAcquire - refusals,
      );
      expect(calls.semaphoreRelease + calls.lockRelease).toBe(calls.semaphoreAcquire + calls.lockAcquire - refusals);
    };

    it("a full semaphore answers 503 with Retry-After and a problem+json body", async () => {
      const first = get("/work", { "x-tenant": "a", "x-id": "1" }).then((res) => res);
      const second = get("/work", { "x-tenant": "a", "x-id": "2" }).then((res) => res);
      await eventually(() => control.entered.length === 2);
      const refused = await get("/work", { "x-tenant": "a", "x-id": "3" });
      refusals++;
      expect(refused.status).toBe(503);
      expect(refused.headers["content-type"]).toMatch(/^application\/problem\+json/);
      expect(refused.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      expect(JSON.parse(refused.text)).toMatchObject({
        type: "urn:leasehold:problem:semaphore-full",
        title: expect.any(String),
        status: 503,
        detail: expect.stringContaining("work:a"),
        key: "work:a",
        limit: 2,
      });
      // The engine's reason, not the problem type's name.
      expect(events.refusedFor("work:a")).toEqual(["full"]);
      expect(await count("work:a")).toBe(2);
      control.openAll();
      expect((await first).body).toEqual({ key: "work:a", limit: 2 });
      expect((await second).status).toBe(200);
      // The client can read the response before the server's "finish" (a write callback) has run.
      await eventually(async () => (await count("work:a")) === 0);
      await releasedExactlyOnce();
    });

    it("a held lock answers 409 with Retry-After and a problem+json body", async () => {
      const holder = request(app.url)
        .post("/orders/42")
        .set("x-id", "1")
        .then((res) => res);
      await eventually(() => control.entered.length === 1);
      const refused = await request(app.url).post("/orders/42").set("x-id", "2");
      refusals++;
      expect(refused.status).toBe(409);
      expect(refused.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      expect(JSON.parse(refused.text)).toMatchObject({
        type: "urn:leasehold:problem:lock-held",
        status: 409,
        key: "order:42",
        limit: 1,
      });
      expect(events.refusedFor("order:42")).toEqual(["full"]);
      // Another order is not blocked.
      const other = request(app.url)
        .post("/orders/43")
        .set("x-id", "3")
        .then((res) => res);
      await eventually(() => control.entered.length === 2);
      control.openAll();
      expect((await holder).status).toBe(200);
      expect((await other).status).toBe(200);
      await releasedExactlyOnce();
    });

    it("status changes the refusal code, and onRejected replaces the response", async () => {
      const held = get("/quota", { "x-id": "1" }).then((res) => res);
      const custom = get("/custom", { "x-id": "2" }).then((res) => res);
      await eventually(() => control.entered.length === 2);
      const quota = await get("/quota", { "x-id": "3" });
      const replaced = await get("/custom", { "x-id": "4" });
      refusals += 2;
      expect(quota.status).toBe(429);
      expect(JSON.parse(quota.text)).toMatchObject({ status: 429 });
      expect(replaced.status).toBe(418);
      expect(replaced.body).toMatchObject({ custom: "refusal", retryAfter: expect.any(Number) });
      control.openAll();
      await held;
      await custom;
      await releasedExactlyOnce();
    });

    it("tenants are isolated, and one name on two routes shares one budget", async () => {
      const a1 = get("/work", { "x-tenant": "a", "x-id": "a1" }).then((res) => res);
      const a2 = get("/work-too", { "x-tenant": "a", "x-id": "a2" }).then((res) => res);
      await eventually(() => control.entered.length === 2);
      // Tenant a is full across both routes...
      expect((await get("/work-too", { "x-tenant": "a", "x-id": "a3" })).status).toBe(503);
      expect((await get("/work", { "x-tenant": "a", "x-id": "a4" })).status).toBe(503);
      refusals += 2;
      // ...while tenant b is admitted at once.
      const b = get("/work", { "x-tenant": "b", "x-id": "b1" }).then((res) => res);
      await eventually(() => control.entered.includes("b1"));
      control.open("b1");
      expect((await b).status).toBe(200);
      control.openAll();
      await a1;
      await a2;
      await releasedExactlyOnce();
    });

    it("a limit can be a function of the request (per-tenant limits)", async () => {
      const big = [
        get("/tenant-limit", { "x-tenant": "big", "x-id": "1" }).then((r) => r),
        get("/tenant-limit", { "x-tenant": "big", "x-id": "2" }).then((r) => r),
      ];
      await eventually(() => control.entered.length === 2);
      const small = get("/tenant-limit", { "x-tenant": "small", "x-id": "3" }).then((r) => r);
      await eventually(() => control.entered.length === 3);
      expect((await get("/tenant-limit", { "x-tenant": "small", "x-id": "4" })).status).toBe(503);
      expect((await get("/tenant-limit", { "x-tenant": "big", "x-id": "5" })).status).toBe(503);
      refusals += 2;
      control.openAll();
      await Promise.all([...big, small]);
      await releasedExactlyOnce();
    });

    it("a streamed body keeps its permit until its last byte", async () => {
      const stream = openStream(`${app.url}/stream`, { "x-id": "s1" });
      await eventually(() => stream.text().includes("first"));
      // The handler has returned control to the event loop mid-body: the permit is still held.
      expect(await count("stream")).toBe(1);
      expect((await get("/stream", { "x-id": "s2" })).status).toBe(503);
      refusals++;
      control.open("s1");
      await eventually(() => stream.ended());
      expect(stream.text()).toBe("first\nsecond\n");
      await eventually(async () => (await count("stream")) === 0);
      await releasedExactlyOnce();
    });

    it("releases exactly once when the handler throws or rejects", async () => {
      const thrown = await get("/throw");
      expect(thrown.status).toBe(500);
      expect(thrown.body).toMatchObject({ message: "handler failed" });
      const rejected = await get("/reject");
      expect(rejected.status).toBe(500);
      expect(rejected.body).toMatchObject({ message: "handler rejected" });
      await eventually(async () => (await count("throw")) === 0 && (await count("reject")) === 0);
      await releasedExactlyOnce();
    });

    it("a client that disconnects mid-handler aborts the signal with a client-abort error; the permit returns when the handler ends", async () => {
      const stream = openStream(`${app.url}/work`, { "x-tenant": "a", "x-id": "gone" });
      await eventually(() => control.entered.includes("gone"));
      expect(await count("work:a")).toBe(1);
      stream.cut();
      await eventually(() => control.reasons.has("gone"));
      expect(control.reasons.get("gone")).toBeInstanceOf(ClientAbortedError);
      control.open("gone");
      await eventually(async () => (await count("work:a")) === 0);
      await releasedExactlyOnce();
      await eventually(() => events.of("work:a").length === 1);
      expect(events.of("work:a").map(({ type }) => type)).toEqual(["released"]);
    });

    it("a client that disconnects during a stream returns the permit", async () => {
      const stream = openStream(`${app.url}/stream`, { "x-id": "cut" });
      await eventually(() => stream.text().includes("first"));
      stream.cut();
      await eventually(() => control.reasons.has("cut"));
      expect(control.reasons.get("cut")).toBeInstanceOf(ClientAbortedError);
      // Express cannot tell the handler is done until it ends the response; the others know already.
      control.open("cut");
      await eventually(async () => (await count("stream")) === 0);
      await releasedExactlyOnce();
      await eventually(() => events.of("stream").length === 1);
      expect(events.of("stream").map(({ type }) => type)).toEqual(["released"]);
    });

    it("a client that disconnects does not free the permit while its handler works on; the handler's end does, and it is no loss", async () => {
      const first = openStream(`${app.url}/linger`, { "x-id": "l1" });
      await eventually(() => control.entered.includes("l1"));
      first.cut();
      await eventually(() => control.reasons.has("l1"));
      expect(control.reasons.get("l1")).toBeInstanceOf(ClientAbortedError);
      // The first handler is still working: limit 1 holds.
      let refused: request.Response | undefined;
      void get("/linger", { "x-id": "l2" }).then((res) => {
        refused = res;
      });
      await eventually(() => refused !== undefined || control.entered.includes("l2"));
      expect(control.entered).not.toContain("l2");
      refusals++;
      expect(refused?.status).toBe(503);
      expect(await count("linger")).toBe(1);
      control.open("l1");
      await eventually(async () => (await count("linger")) === 0);
      const next = get("/linger", { "x-id": "l3" }).then((res) => res);
      await eventually(() => control.entered.includes("l3"));
      control.open("l3");
      expect((await next).status).toBe(200);
      await releasedExactlyOnce();
      await eventually(() => events.of("linger").length === 2);
      expect(events.of("linger").map(({ type }) => type)).toEqual(["released", "released"]);
      expect(control.lostHook).toEqual([]);
    });

    it("a handler that ignores the disconnect and never ends loses its permit after disconnectGraceMs, reported as a loss", async () => {
      const first = openStream(`${app.url}/abandon`, { "x-id": "a1" });
      await eventually(() => control.entered.includes("a1"));
      first.cut();
      await eventually(() => control.reasons.has("a1"));
      expect(control.reasons.get("a1")).toBeInstanceOf(ClientAbortedError);
      await eventually(async () => (await count("abandon")) === 0);
      await eventually(() => events.of("abandon").length === 2);
      // Reported before the permit went back: the diagnostics event, hence the metrics, and the hook.
      expect(events.of("abandon").map(({ type }) => type)).toEqual(["lost", "released"]);
      expect(events.of("abandon")[0]?.event).toMatchObject({ error: expect.any(SemaphoreLeaseLostError) });
      expect(control.lostHook).toEqual([{ id: "a1", error: expect.any(SemaphoreLeaseLostError) }]);
      expect((control.lostHook[0]?.error as Error | undefined)?.cause).toBeInstanceOf(ClientAbortedError);
      // The permit is free for the next request.
      const next = get("/abandon", { "x-id": "a2" }).then((res) => res);
      await eventually(() => control.entered.includes("a2"));
      control.open("a2");
      expect((await next).status).toBe(200);
      await releasedExactlyOnce();
      expect(control.lostHook).toHaveLength(1);
    });

    it("a client that left during a step before leasehold takes no permit, so none is kept for a response nobody reads", async () => {
      const gone = openStream(`${app.url}/late`, { "x-id": "gone" });
      await eventually(() => control.entered.includes("before:gone"));
      gone.cut();
      await eventually(async () => (await app.connections()) === 0);
      control.open("before:gone");
      // A request that comes next finds the permit free.
      let answered: request.Response | undefined;
      const next = get("/late", { "x-id": "next" }).then((res) => {
        answered = res;
        return res;
      });
      await eventually(() => control.entered.includes("before:next"));
      control.open("before:next");
      await eventually(() => control.entered.includes("next") || answered !== undefined);
      expect(control.entered).not.toContain("gone");
      control.open("next");
      expect((await next).status).toBe(200);
      await eventually(async () => (await count("late")) === 0);
      await releasedExactlyOnce();
    });

    it("a handler that releases its lease early frees the permit at once and is neither cut nor reported", async () => {
      const first = get("/early", { "x-id": "e1" }).then((res) => res);
      await eventually(() => control.entered.includes("e1"));
      expect(await count("early")).toBe(0);
      const second = get("/early", { "x-id": "e2" }).then((res) => res);
      await eventually(() => control.entered.includes("e2"));
      // Both handlers work on well past their leases' length (200 ms): a lease kept after an early
      // release would be found lapsed by now (timers never fire early).
      await pause(600);
      control.openAll();
      const [one, two] = [await first, await second];
      expect([one.status, two.status]).toEqual([200, 200]);
      expect([one.body, two.body]).toEqual([{ released: true }, { released: true }]);
      expect(control.lostHook).toEqual([]);
      await eventually(() => events.of("early").length === 2);
      expect(events.of("early").map(({ type }) => type)).toEqual(["released", "released"]);
      expect(control.reasons.has("e1")).toBe(false);
      await releasedExactlyOnce();
    });

    it("a lease lost before the response starts aborts the signal and answers 503", async () => {
      const res = await get("/lose", { "x-id": "lost" });
      expect(res.status).toBe(503);
      expect(JSON.parse(res.text)).toMatchObject({ type: "urn:leasehold:problem:lease-lost", key: "lose" });
      expect(control.reasons.get("lost")).toBeInstanceOf(SemaphoreLeaseLostError);
      expect(control.reasons.get("hook:lose")).toBeInstanceOf(SemaphoreLeaseLostError);
      await eventually(async () => (await count("lose")) === 0);
      await releasedExactlyOnce();
    });

    it("a lease lost during a stream ends the response, so the over-limit work stops", async () => {
      const stream = openStream(`${app.url}/lose-stream`, { "x-id": "lost-stream" });
      await eventually(() => stream.failed() || stream.ended());
      expect(stream.failed()).toBe(true);
      expect(stream.text()).toBe("first\n");
      expect(control.reasons.get("lost-stream")).toBeInstanceOf(SemaphoreLeaseLostError);
      await eventually(async () => (await count("lose-stream")) === 0);
      await releasedExactlyOnce();
    });

    it("a key that throws, or returns an empty value, goes to the framework's error path and takes no permit", async () => {
      const empty = await get("/empty-key");
      expect(empty.status).toBe(500);
      expect(empty.body.message).toMatch(/key function of "ek" returned an empty string/);
      const thrown = await get("/throwing-key");
      expect(thrown.status).toBe(500);
      expect(thrown.body.message).toBe("no tenant header");
      expect(calls.semaphoreAcquire).toBe(0);
    });

    it("a client that disconnects while waiting for a permit never reaches the handler, and takes nothing", async () => {
      const holder = get("/spin", { "x-id": "holder" }).then((r) => r);
      await eventually(() => control.entered.includes("holder"));
      const waiting = openStream(`${app.url}/spin`, { "x-id": "impatient" });
      await eventually(() => calls.semaphoreAcquire >= 3);
      waiting.cut();
      // Free the permit only once the server has seen the client go.
      await eventually(async () => (await app.connections()) === 1);
      control.open("holder");
      expect((await holder).status).toBe(200);
      // The spinning acquire may still win the freed permit; it must give it straight back.
      await eventually(async () => (await count("spin")) === 0);
      expect(control.entered).not.toContain("impatient");
      const acquired = await store.semaphore.count({ storeKey: storeKey("semaphore", "semaphore", "spin") });
      expect(acquired).toBe(0);
    });

    it("waitMs queues requests fairly, maxQueue refuses the overflow, and the lease reports its wait", async () => {
      const holder = get("/queue", { "x-id": "holder" }).then((r) => r);
      await eventually(() => control.entered.includes("holder"));
      const waiting = get("/queue", { "x-id": "waiter" }).then((r) => r);
      await eventually(() => calls.semaphoreAcquire === 2);
      const overflow = await get("/queue", { "x-id": "overflow" });
      refusals++;
      expect(overflow.status).toBe(503);
      expect(JSON.parse(overflow.text)).toMatchObject({
        type: "urn:leasehold:problem:semaphore-full",
        detail: expect.stringContaining("queue is full"),
      });
      expect(events.refusedFor("queue")).toEqual(["queue-full"]);
      expect(overflow.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      control.open("holder");
      await eventually(() => control.entered.includes("waiter"));
      control.open("waiter");
      expect((await holder).status).toBe(200);
      const admitted = await waiting;
      expect(admitted.status).toBe(200);
      expect(admitted.body.waitedMs).toBeGreaterThan(0);
      // Two leases (the holder's and the waiter's, whose join and claim were two acquire calls), two releases.
      await eventually(async () => (await count("queue")) === 0);
      await eventually(() => calls.semaphoreRelease === 2);
    });

    it("a client that disconnects while queued leaves the queue at once", async () => {
      const holder = get("/queue", { "x-id": "holder" }).then((r) => r);
      await eventually(() => control.entered.includes("holder"));
      const waiting = openStream(`${app.url}/queue`, { "x-id": "gone" });
      await eventually(() => calls.semaphoreAcquire === 2);
      waiting.cut();
      // The place is given up without waiting for the holder: the queue (maxQueue 1) has room again.
      await eventually(() => calls.semaphoreLeave === 1);
      const next = get("/queue", { "x-id": "next" }).then((r) => r);
      await eventually(() => calls.semaphoreAcquire === 3);
      control.open("holder");
      await eventually(() => control.entered.includes("next"));
      control.open("next");
      expect((await next).status).toBe(200);
      expect(control.entered).not.toContain("gone");
      await holder;
      await eventually(async () => (await count("queue")) === 0);
    });

    it("skip lets chosen requests through without a lease", async () => {
      const held = get("/skip", { "x-id": "1" }).then((r) => r);
      await eventually(() => control.entered.length === 1);
      const skipped = get("/skip", { "x-id": "2", "x-skip": "1" }).then((r) => r);
      await eventually(() => control.entered.length === 2);
      control.openAll();
      expect((await held).body).toMatchObject({ key: "skip" });
      expect((await skipped).body).toEqual({ limit: null });
      await releasedExactlyOnce();
    });
  });

  describe("with the store down", () => {
    let app: RunningApp;
    let control: Control;
    let client: Redis;
    beforeEach(async () => {
      client = new Redis(`redis://127.0.0.1:${await freePort()}`, { maxRetriesPerRequest: null, lazyConnect: true });
      client.on("error", () => {});
      const store = redisStore(client, { timeoutMs: 200 });
      control = new Control(store);
      app = await harness.start(store, control);
    });
    afterEach(async () => {
      client.disconnect();
      await app.close();
    });

    it("fail-closed answers 503 naming the store; fail-open lets the request through without a lease, and reports it", async () => {
      const closed = await request(app.url).get("/work").set("x-tenant", "a");
      expect(closed.status).toBe(503);
      expect(closed.headers["retry-after"]).toMatch(/^[1-9]\d*$/);
      expect(JSON.parse(closed.text)).toMatchObject({
        type: "urn:leasehold:problem:store-unavailable",
        store: "redis",
        key: "work:a",
      });
      const open = await request(app.url).get("/open");
      expect(open.status).toBe(200);
      expect(open.body).toEqual({ lease: false });
      expect(control.reasons.get("store")).toBeInstanceOf(StoreUnavailableError);
    });

    it("after the first failure, refuses at once until the store's next probe, and says when that is in Retry-After", async () => {
      expect((await request(app.url).get("/work").set("x-tenant", "a")).status).toBe(503);
      const burst = await Promise.all(
        Array.from({ length: 10 }, (_, n) => request(app.url).get("/work").set("x-tenant", `t${n}`)),
      );
      for (const res of burst) {
        expect(res.status).toBe(503);
        expect(JSON.parse(res.text)).toMatchObject({ type: "urn:leasehold:problem:store-unavailable" });
        // The next probe is at most 2 s away.
        expect(Number(res.headers["retry-after"])).toBeGreaterThanOrEqual(1);
        expect(Number(res.headers["retry-after"])).toBeLessThanOrEqual(2);
      }
      // fail-open passes without waiting for the store: the refusal came from the breaker, not a timeout.
      expect((await request(app.url).get("/open")).status).toBe(200);
      const refusal = control.reasons.get("store") as StoreUnavailableError;
      expect(refusal.retryAfterMs).toBeGreaterThan(0);
      expect(refusal.retryAfterMs).toBeLessThanOrEqual(2000);
    });
  });
});

describe("stacked middlewares on one route (a limit per route, and one per tenant)", () => {
  const frameworks = [
    [
      "Express",
      (store: Store, opened: Promise<void>) => {
        const app = express();
        const per = { client: store, key: (req: express.Request) => req.get("x-tenant") ?? "none", exposeFence: true };
        const route = expressSemaphore("route", 2, { client: store, exposeFence: true });
        app.get("/", route, expressSemaphore("tenant", 1, per), async (req, res) => {
          await opened;
          res.end(`${req.lease?.key} ${req.lease?.fence}`);
        });
        return createServer(app);
      },
    ],
    [
      "Hono",
      (store: Store, opened: Promise<void>) => {
        const app = new Hono();
        const per = { client: store, key: (c: Context) => c.req.header("x-tenant") ?? "none", exposeFence: true };
        const route = honoSemaphore("route", 2, { client: store, exposeFence: true });
        app.get("/", route, honoSemaphore("tenant", 1, per), async (c) => {
          await opened;
          return c.text(`${c.get("lease")?.key} ${c.get("lease")?.fence}`);
        });
        app.onError((error, c) => ("getResponse" in error ? (error as HTTPException).getResponse() : c.text("error", 500)));
        return createAdaptorServer({ fetch: app.fetch });
      },
    ],
    [
      "Fastify",
      (store: Store, opened: Promise<void>) => {
        const app = Fastify();
        const per = { client: store, key: (req: FastifyRequest) => String(req.headers["x-tenant"] ?? "none"), exposeFence: true };
        const route = fastifySemaphore("route", 2, { client: store, exposeFence: true });
        app.get("/", { onRequest: [route, fastifySemaphore("tenant", 1, per)] }, async (request) => {
          await opened;
          return `${request.lease?.key} ${request.lease?.fence}`;
        });
        void app.ready();
        return app.server;
      },
    ],
  ] as const;

  it.each(frameworks)(
    "%s: each holds its permit while the handler works and returns it after; the handler sees the innermost's lease and fence",
    async (_, serve) => {
      const store = memoryStore();
      const { opened, open } = gate();
      const server = serve(store, opened);
      const slots = semaphore({ client: store, limit: 2 });
      const first = request(server)
        .get("/")
        .set("x-tenant", "a")
        .then((res) => res);
      await eventually(async () => (await slots.count("route")) === 1 && (await slots.count("tenant:a")) === 1);
      expect((await request(server).get("/").set("x-tenant", "a")).status).toBe(503);
      open();
      const answered = await first;
      expect(answered.text).toBe(`tenant:a ${answered.headers["lease-fence"]}`);
      await eventually(async () => (await slots.count("route")) === 0 && (await slots.count("tenant:a")) === 0);
    },
  );
});

describe("adapter options are validated when the middleware is created", () => {
  const cases: [string, () => unknown, RegExp][] = [
    ["Express limit 0", () => expressSemaphore("x", 0), /`limit` must be an integer of at least 1/],
    ["Express empty name", () => expressLock(""), /lease name/],
    ["Express unknown option", () => expressSemaphore("x", 1, { tenants: "a" } as never), /unknown option `tenants`/],
    ["Express tenant not a function", () => expressSemaphore("x", 1, { tenant: "a" } as never), /`tenant` must be a function/],
    ["Express status 200", () => expressLock("x", { status: 200 }), /`status` must be an HTTP error status/],
    ["Express key not a function", () => expressLock("x", { key: "tenant" as never }), /`key` must be a function/],
    ["Express heartbeat too large", () => expressSemaphore("x", 1, { leaseMs: 100, heartbeatMs: 90 }), /at most half of leaseMs/],
    ["Express onStoreError typo", () => expressLock("x", { onStoreError: "open" as never }), /"fail-closed" or "fail-open"/],
    ["Hono weight 0", () => honoSemaphore("x", 2, { weight: 0 }), /`weight` must be an integer of at least 1/],
    ["Hono retryAfter negative", () => honoLock("x", { retryAfter: -1 }), /`retryAfter` must be whole seconds/],
    [
      "Hono ttl on a semaphore",
      () => honoSemaphore("x", 1, { ttlMs: 5 } as never),
      /unknown option `ttlMs` for semaphore middleware/,
    ],
    [
      "Hono bad client",
      () => honoLock("x", { client: "redis://x" as never }),
      /`client` must be a Redis client \(an ioredis or iovalkey Redis or Cluster, or a node-redis client/,
    ],
    ["Hono name with a newline", () => honoLock("a\nb"), /control characters/],
    ["Express waitMs beyond a timer", () => expressSemaphore("x", 1, { waitMs: 2 ** 31 }), /`waitMs` must be a whole number/],
    [
      "Hono retryDelayMs beyond a timer",
      () => honoLock("x", { retries: 1, retryDelayMs: 2 ** 31 }),
      /`retryDelayMs` must be a whole number of milliseconds from 0 to 2147483647/,
    ],
    ["Express prefix with a colon", () => expressLock("x", { prefix: "app:locks" }), /must not contain ":"/],
    ["Hono prefix with a colon", () => honoSemaphore("x", 1, { prefix: "app:slots" }), /must not contain ":"/],
    [
      "Express disconnectGraceMs 0",
      () => expressSemaphore("x", 1, { disconnectGraceMs: 0 }),
      /`disconnectGraceMs` must be a whole number of milliseconds/,
    ],
    ["Hono disconnectGraceMs in seconds", () => honoLock("x", { disconnectGraceMs: 2.5 }), /disconnectGraceMs: 5000/],
    ["Express disconnectGraceMs a string", () => expressLock("x", { disconnectGraceMs: "5s" as never }), /`disconnectGraceMs`/],
    ["Fastify limit 0", () => fastifySemaphore("x", 0), /`limit` must be an integer of at least 1/],
    ["Fastify unknown option", () => fastifyLock("x", { tenant: () => "a" } as never), /unknown option `tenant` for lock hook/],
    ["Fastify key not a function", () => fastifySemaphore("x", 1, { key: "tenant" as never }), /`key` must be a function/],
  ];
  it.each(cases)("%s", (_, create, message) => {
    expect(create).toThrow(message);
  });

  it("an onRejected that is not a function is a ValidationError naming the option, in every adapter", () => {
    for (const create of [
      () => expressSemaphore("x", 1, { onRejected: "503" as never }),
      () => honoLock("x", { onRejected: 503 as never }),
      () => fastifyLock("x", { onRejected: "409" as never }),
      () => Semaphore("x", 1, { onRejected: {} as never }),
    ]) {
      expect(create).toThrow(ValidationError);
      expect(create).toThrow(/`onRejected` must be a function/);
    }
  });

  it("a bad disconnectGraceMs is a ValidationError naming the option", () => {
    const error = (() => {
      try {
        expressSemaphore("x", 1, { disconnectGraceMs: -1 });
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toMatchObject({ name: "ValidationError", option: "disconnectGraceMs" });
  });
});
