// Every Redis client library leasehold accepts (ioredis, iovalkey, node-redis
// current and 5), through every way a client is passed, on a private
// redis-server so that command statistics, SCRIPT FLUSH and CLIENT PAUSE touch
// nobody else. The conformance suite runs over the same clients (test/support/stores.ts).
import "reflect-metadata";
import { readdirSync, readFileSync } from "node:fs";
import { Controller, Get, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { ExpressAdapter } from "@nestjs/platform-express";
import express from "express";
import { Hono } from "hono";
import { Cluster, Redis } from "ioredis";
import { Valkey, Cluster as ValkeyCluster } from "iovalkey";
import { createClient, createCluster } from "redis";
import { createClient as createClient5, createCluster as createCluster5 } from "redis5";
import request from "supertest";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../../integrations/express/index.js";
import { semaphore as honoSemaphore } from "../../../integrations/hono/index.js";
import { LeaseholdModule, Semaphore } from "../../../integrations/nestjs/index.js";
import { lock, type RedisClient, redisStore, StoreUnavailableError, semaphore, ValidationError } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { NodeRedisLikeClient } from "../../../src/store/index.js";
import { clientKind } from "../../../src/store/redis/clients.js";
import { listenNest } from "../../http/nest-app.js";
import { type NodeRedis, newNodeRedis, newRedis, newValkey, uniquePrefix } from "../../support/redis.js";
import { freePort, type RedisServer, startRedisServer } from "../../support/redis-server.js";
import { eventually } from "../../support/stores.js";

let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await startRedisServer();
  admin = newRedis(server.url);
});
afterAll(async () => {
  await server.stop();
});
const others: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(others.splice(0).map((other) => other.stop()));
});

/** Calls of each command the private server has run since the last reset. */
async function commandCalls(): Promise<Record<string, number>> {
  const stats = await admin.info("commandstats");
  return Object.fromEntries([...stats.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)]));
}

/** Connections the private server has open. */
async function connections(): Promise<number> {
  return String(await admin.client("LIST"))
    .trim()
    .split("\n").length;
}

describe("recognising a client", () => {
  it("tells each library and topology apart by shape, none of them connected", () => {
    const made = {
      ioredis: new Redis({ lazyConnect: true }),
      ioredisCluster: new Cluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true }),
      valkey: new Valkey({ lazyConnect: true }),
      valkeyCluster: new ValkeyCluster([{ host: "127.0.0.1", port: 1 }], { lazyConnect: true }),
    };
    expect(clientKind(made.ioredis)).toBe("ioredis");
    expect(clientKind(made.ioredisCluster)).toBe("ioredis-cluster");
    expect(clientKind(made.valkey)).toBe("ioredis");
    expect(clientKind(made.valkeyCluster)).toBe("ioredis-cluster");
    expect(clientKind(createClient())).toBe("node-redis");
    expect(clientKind(createClient5())).toBe("node-redis");
    expect(clientKind(createCluster({ rootNodes: [{ url: "redis://127.0.0.1:1" }] }))).toBe("node-redis-cluster");
    expect(clientKind(createCluster5({ rootNodes: [{ url: "redis://127.0.0.1:1" }] }))).toBe("node-redis-cluster");
    for (const client of Object.values(made)) client.disconnect();
  });

  it("imports no client package anywhere in src/ or integrations/: a user of one library never installs another", () => {
    const files = (dir: string): string[] =>
      readdirSync(new URL(`../../../${dir}/`, import.meta.url), { recursive: true, encoding: "utf8" })
        .filter((name) => name.endsWith(".ts"))
        .map((name) => `${dir}/${name}`);
    const clientPackage =
      /^\s*(import|export)\b[^;]*?from\s+["'](ioredis|iovalkey|redis|@redis\/[\w-]+)["']|\b(import|require)\(\s*["'](ioredis|iovalkey|redis|@redis\/[\w-]+)["']/m;
    // The leasehold command talks through ioredis (a peer dependency), imported only when it runs.
    const whenRun = ["src/cli/connect.ts"];
    const offenders = [...files("src"), ...files("integrations")].filter(
      (file) => !whenRun.includes(file) && clientPackage.test(readFileSync(new URL(`../../../${file}`, import.meta.url), "utf8")),
    );
    expect(offenders).toEqual([]);
    const statically = /^\s*(import|export)\b[^;]*?from\s+["'](ioredis|iovalkey|redis|@redis\/[\w-]+)["']/m;
    for (const file of whenRun)
      expect(statically.test(readFileSync(new URL(`../../../${file}`, import.meta.url), "utf8"))).toBe(false);
  });

  it("refuses anything else with a ValidationError that names what is accepted, before any call", () => {
    const accepted =
      /an ioredis or iovalkey Redis or Cluster, or a node-redis client \(createClient\(\)\) or cluster \(createCluster\(\)\)/;
    for (const junk of [{}, { evalSha: () => {} }, { evalsha: () => {} }, "redis://127.0.0.1:6379", 6379]) {
      expect(clientKind(junk)).toBeUndefined();
      expect(() => semaphore({ client: junk as never, limit: 1 })).toThrow(ValidationError);
      expect(() => semaphore({ client: junk as never, limit: 1 })).toThrow(accepted);
      expect(() => redisStore(junk as never)).toThrow(accepted);
    }
    expect(() => lock({ evalSha: () => {} } as never)).toThrow(ValidationError);
  });
});

interface Variant {
  name: string;
  make(url: string): RedisClient;
}

const variants: Variant[] = [
  { name: "ioredis", make: (url) => newRedis(url) },
  { name: "iovalkey", make: (url) => newValkey(url) },
  { name: "node-redis", make: (url) => newNodeRedis(6, { url }) },
  { name: "node-redis 5", make: (url) => newNodeRedis(5, { url }) },
];

describe.each(variants)("through $name", ({ make }) => {
  it("every way of passing a client takes it: semaphore(client), lock(client), redisStore(client), the Express, Hono and NestJS adapters", async () => {
    const client = make(server.url);
    const prefix = uniquePrefix();
    const slots = semaphore(client, { limit: 1, prefix });
    const held = await slots.acquire("k");
    expect(held).not.toBeNull();
    expect(await slots.acquire("k")).toBeNull();
    expect(await held?.release()).toBe(true);
    expect(await lock(client).run(`${prefix}-lock`, async () => "locked")).toBe("locked");
    expect(await semaphore({ client: redisStore(client, { timeoutMs: 1000 }), limit: 1, prefix }).count("k")).toBe(0);

    const app = express();
    app.get("/e", expressSemaphore(`${prefix}-e`, 1, { client }), (req, res) => res.json({ key: req.lease?.key }));
    expect((await request(app).get("/e")).body).toEqual({ key: `${prefix}-e` });

    const hono = new Hono();
    hono.get("/h", honoSemaphore(`${prefix}-h`, 1, { client }), (c) => c.json({ key: c.get("lease")?.key }));
    expect(await (await hono.request("/h")).json()).toEqual({ key: `${prefix}-h` });

    @Controller()
    class NestRoutes {
      @Get("n")
      @Semaphore(`${prefix}-n`, 1)
      route() {
        return { ok: true };
      }
    }
    @Module({ imports: [LeaseholdModule.forRoot({ client })], controllers: [NestRoutes] })
    class NestApp {}
    const nest = await listenNest(await NestFactory.create(NestApp, new ExpressAdapter(), { logger: false }));
    try {
      expect((await request(nest.url).get("/n")).body).toEqual({ ok: true });
    } finally {
      await nest.close();
    }
    // Every permit came back, through each route.
    for (const id of ["k", `${prefix}-e`, `${prefix}-h`, `${prefix}-n`]) {
      await eventually(
        async () => (await semaphore(client, { limit: 1, prefix: id === "k" ? prefix : "semaphore" }).count(id)) === 0,
      );
    }
  });

  it("runs scripts by SHA, re-sends each by source once after SCRIPT FLUSH, then by SHA again", async () => {
    const slots = semaphore(make(server.url), { limit: 1, prefix: uniquePrefix() });
    await (await slots.acquire("k"))?.release(); // loads the scripts
    await admin.config("RESETSTAT");
    for (let n = 0; n < 3; n++) await (await slots.acquire("k"))?.release();
    expect(await commandCalls()).toMatchObject({ evalsha: 6 });
    expect((await commandCalls()).eval).toBeUndefined();
    await admin.script("FLUSH");
    for (let n = 0; n < 3; n++) await (await slots.acquire("k"))?.release();
    // The acquire's and the release's scripts answered NOSCRIPT once each and were sent with their source.
    expect(await commandCalls()).toMatchObject({ evalsha: 12, eval: 2 });
  });

  it("gathers the acquires of one turn on one id into few script calls", async () => {
    const slots = semaphore(make(server.url), { limit: 10, prefix: uniquePrefix() });
    await (await slots.acquire("k"))?.release();
    await admin.config("RESETSTAT");
    const leases = await Promise.all(Array.from({ length: 10 }, () => slots.acquire("k")));
    expect(leases.every((lease) => lease !== null)).toBe(true);
    // Two go at once; the other eight wait for the end of the turn and go as one call.
    expect((await commandCalls()).evalsha).toBe(3);
    await Promise.all(leases.map((lease) => lease?.release()));
    expect(await slots.count("k")).toBe(0);
  });

  it("bounds a round trip by timeoutMs, and gives back a permit whose acquire answered too late", async () => {
    const client = make(server.url);
    const prefix = uniquePrefix();
    const slots = semaphore(redisStore(client, { timeoutMs: 200 }), { limit: 1, prefix });
    await (await slots.acquire("k"))?.release(); // connected, scripts loaded
    // The server stops answering for a while: the acquire runs after the pause, its answer too late.
    await admin.client("PAUSE", 1000, "ALL");
    const started = performance.now();
    const error = await slots.acquire("k").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/did not answer acquire within 200 ms/);
    expect(performance.now() - started).toBeLessThan(900);
    // The clean-up, sent behind it, gives the permit back: no ghost lease for the 60 s it would last.
    await eventually(async () => (await admin.exists(storeKey(prefix, "semaphore", "k"))) === 0, 5_000);
    // The timeout took the store down; its probe brings it back once the server answers again.
    await eventually(async () => (await slots.health()).state === "up", 5_000);
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    await lease?.release();
  });

  it("wakes a waiter of another process through pub/sub, on a connection that closes a second after the last waiter leaves", async () => {
    const prefix = uniquePrefix();
    // Two clients and two stores: the release's own reply cannot reach the waiter, only pub/sub can.
    // A 30 s waiter lease: its refresh (every 10 s) cannot wake the waiter within this test either.
    const waiting = semaphore(redisStore(make(server.url), { waiterLeaseMs: 30_000 }), { limit: 1, prefix });
    const holding = semaphore(make(server.url), { limit: 1, prefix });
    const held = await holding.acquire("k", { leaseMs: 60_000 });
    expect(await waiting.count("k")).toBe(1); // both clients connected
    const before = await connections();
    const waiter = waiting.acquire("k", { waitMs: 10_000 });
    const channel = `${storeKey(prefix, "semaphore", "k")}:ch`;
    await eventually(async () => (await admin.pubsub("NUMSUB", channel))[1] === 1);
    expect(await connections()).toBe(before + 1); // the waiting store's subscriber
    const released = performance.now();
    await held?.release();
    const lease = await waiter;
    expect(lease).not.toBeNull();
    expect(performance.now() - released).toBeLessThan(2_000);
    await lease?.release();
    await eventually(async () => (await admin.pubsub("NUMSUB", channel))[1] === 0, 5_000);
    // The store closed the subscriber it made; the client it was given stays open and usable.
    await eventually(async () => (await connections()) === before, 5_000);
    expect(await waiting.count("k")).toBe(0);
  });
});

describe("node-redis clusters", () => {
  it.each([
    ["6", (url: string): NodeRedisLikeClient => createCluster({ rootNodes: [{ url }] })],
    ["5", (url: string): NodeRedisLikeClient => createCluster5({ rootNodes: [{ url }] })],
  ] as const)(
    "%s: unreachable at first use, calls fail with its connect error within the bound, and the store's probe tries connecting again after a second",
    async (_, create) => {
      const cluster = create(`redis://127.0.0.1:${await freePort()}`);
      // Counts leasehold's connect() calls, passing each through.
      const connect = cluster.connect.bind(cluster);
      let tries = 0;
      Object.assign(cluster, {
        connect: () => {
          tries++;
          return connect();
        },
      });
      const slots = semaphore(redisStore(cluster, { timeoutMs: 300 }), { limit: 1, prefix: uniquePrefix() });
      const started = performance.now();
      for (let n = 0; n < 3; n++) await expect(slots.acquire("k")).rejects.toThrow(/root nodes are unavailable/);
      expect(performance.now() - started).toBeLessThan(1_000);
      // Inside that second the first failure is repeated, with no new attempt (and the breaker
      // refuses at once, naming it); after it, the breaker's probe makes a new one.
      expect(tries).toBe(1);
      expect(cluster.isOpen).toBe(false);
      await eventually(() => tries === 2, 5_000);
      await expect(slots.acquire("k")).rejects.toThrow(/root nodes are unavailable/);
      expect(tries).toBe(2);
    },
  );
});

describe.each([
  { major: 6, create: createClient },
  { major: 5, create: createClient5 },
] as const)("node-redis $major, connected or not", ({ major }) => {
  const fresh = (url = server.url): NodeRedis => newNodeRedis(major, { url, connect: false });

  it("connects a client passed unconnected on first use, adds an error listener only if it had none, and never closes it", async () => {
    const client = fresh();
    expect(client.isOpen).toBe(false);
    expect(client.listenerCount("error")).toBe(0);
    const slots = semaphore(client, { limit: 1, prefix: uniquePrefix() });
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    expect(client.isOpen).toBe(true);
    expect(client.listenerCount("error")).toBe(1);
    await lease?.release();
    // Waiting made and closed a subscriber; the client itself is still the user's, open.
    const held = await slots.acquire("k");
    const queued = slots.acquire("k", { waitMs: 5_000 });
    await held?.release();
    await (await queued)?.release();
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(client.isOpen).toBe(true);
    expect(await client.sendCommand(["PING"])).toBe("PONG");
  });

  it("leaves a client the user connected as it is, and takes a promise of one", async () => {
    const client = newNodeRedis(major, { url: server.url });
    expect(client.listenerCount("error")).toBe(1);
    expect(await semaphore(client, { limit: 1, prefix: uniquePrefix() }).count("k")).toBe(0);
    expect(client.listenerCount("error")).toBe(1);
    const connecting = fresh();
    connecting.on("error", () => {});
    const viaPromise = semaphore({ client: connecting.connect().then(() => connecting), limit: 1, prefix: uniquePrefix() });
    expect(await viaPromise.acquire("k")).not.toBeNull();
  });

  it("does not reopen a client its owner closed: calls fail with StoreUnavailableError", async () => {
    const client = newNodeRedis(major, { url: server.url });
    const slots = semaphore(client, { limit: 1, prefix: uniquePrefix() });
    expect(await slots.count("k")).toBe(0);
    client.destroy();
    await expect(slots.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(client.isOpen).toBe(false);
  });

  it("Redis down when first used: calls fail within timeoutMs, nothing crashes, and they succeed once Redis is up", async () => {
    const port = await freePort();
    const client = fresh(`redis://127.0.0.1:${port}`);
    const slots = semaphore(redisStore(client, { timeoutMs: 300 }), { limit: 1, prefix: uniquePrefix() });
    const started = performance.now();
    await expect(slots.acquire("k")).rejects.toThrow(/did not answer acquire within 300 ms/);
    await expect(slots.acquire("k")).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(performance.now() - started).toBeLessThan(1_500);
    others.push(await startRedisServer([], port));
    let lease: Awaited<ReturnType<typeof slots.acquire>> = null;
    await eventually(async () => {
      lease = await slots.acquire("k").catch(() => null);
      return lease !== null;
    }, 10_000);
    expect(await slots.count("k")).toBe(1);
  });
});
