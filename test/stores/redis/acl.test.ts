import { readdirSync, readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lock, redisStore, StorePermissionError, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { cli } from "../../support/cli.js";
import { type RedisServer, startRedisServer } from "../../support/redis-server.js";
import { eventually } from "../../support/stores.js";

// The ACL docs/operations.md documents, word for word: the suite runs as a user made with exactly it.
const DOCUMENTED = readFileSync("docs/operations.md", "utf8")
  .split("\n")
  .find((line) => line.startsWith("ACL SETUSER leasehold on >CHANGE-ME "));

let server: RedisServer;
let admin: Redis;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await startRedisServer();
  admin = connectAs("default", "");
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await server.stop();
});

function connectAs(user: string, password: string): Redis {
  const client = new Redis(server.url, { username: user, password: password || undefined, maxRetriesPerRequest: 1 } as never);
  client.on("error", () => {});
  clients.push(client);
  return client;
}

/** Creates `user` with the documented rules, edited by `edit` (the missing-permission cases). */
async function userWith(user: string, edit: (rules: string[]) => string[] = (rules) => rules): Promise<Redis> {
  const rules = (DOCUMENTED as string)
    .split(" ")
    .slice(3)
    .map((rule) => (rule === ">CHANGE-ME" ? ">pw" : rule));
  await admin.call("ACL", "SETUSER", user, "reset", ...edit(rules));
  return connectAs(user, "pw");
}

describe("least privilege: the documented ACL", () => {
  it("is documented, and names every command the scripts call", () => {
    expect(DOCUMENTED).toBeDefined();
    const granted = new Set(
      (DOCUMENTED as string)
        .split(" ")
        .filter((rule) => rule.startsWith("+"))
        .map((rule) => rule.slice(1)),
    );
    const called = new Set<string>();
    for (const dir of ["lua", "lua/lib"]) {
      for (const file of readdirSync(dir).filter((name) => name.endsWith(".lua"))) {
        for (const [, command] of readFileSync(`${dir}/${file}`, "utf8").matchAll(/redis\.p?call\('([A-Za-z]+)'/g)) {
          called.add((command as string).toLowerCase());
        }
      }
    }
    expect(called.size).toBeGreaterThan(10);
    expect([...called].filter((command) => !granted.has(command))).toEqual([]);
    for (const client of ["evalsha", "eval", "subscribe", "unsubscribe"]) expect(granted.has(client)).toBe(true);
  });

  it("is enough for every core path: fail fast, weights, tenants, renewal, locks, the command", async () => {
    const redis = await userWith("core");
    // Scripts not cached yet: the first calls take the EVAL path, and again after a flush.
    await admin.call("SCRIPT", "FLUSH");
    const slots = semaphore(redis, { limit: 3, tenantLimit: 2 });
    const a = await slots.acquire("s", { weight: 2, owner: "a" });
    const b = await slots.acquire("s", { tenant: "acme" });
    expect(await slots.acquire("s")).toBeNull();
    expect(await slots.count("s")).toBe(2);
    expect(await slots.stats("s")).toMatchObject({ used: 3, holders: 2, tenants: 1 });
    expect((await slots.holders("s")).map((h) => h.owner)).toContain("a");
    expect(await a?.extend()).toBe(true);
    await admin.call("SCRIPT", "FLUSH");
    expect(await a?.release()).toBe(true);
    expect(await b?.release()).toBe(true);
    expect(await slots.run("s", async (lease) => lease.fence, { heartbeatMs: 20, leaseMs: 200 })).toBeGreaterThan(0);

    const locks = lock(redis);
    const held = await locks.acquire("l", { owner: "cron" });
    expect(await locks.acquire("l")).toBeNull();
    expect(await locks.stats("l")).toMatchObject({ held: true });
    expect(await locks.holder("l")).toMatchObject({ owner: "cron" });
    expect(await held?.extend()).toBe(true);

    // The command, as the same user: inspect, then release the lock.
    const url = `redis://core:pw@127.0.0.1:${server.port}`;
    const inspected = await cli(["inspect", "l", "--kind", "lock", "--json", "--url", url]);
    expect(inspected.code).toBe(0);
    expect(JSON.parse(inspected.stdout).holders[0].owner).toBe("cron");
    const released = await cli(["release", "l", "--kind", "lock", "--token", held?.token as string, "--url", url]);
    expect(released.stderr).toBe("");
    expect(released.code).toBe(0);
    expect(await held?.extend()).toBe(false);
    // Nothing outside the prefixes was touched or needed.
    expect((await admin.keys("*")).every((key) => key.startsWith("{semaphore:") || key.startsWith("{lock:"))).toBe(true);
  });

  it("is enough for the waiting room: waiters on other connections are granted in turn, semaphore and lock", async () => {
    const holder = await userWith("waiting-holder");
    const waiting = await userWith("waiting-waiter");
    const slots = semaphore(holder, { limit: 1 });
    const queued = semaphore(waiting, { limit: 1 });
    const first = await slots.acquire("w");
    const second = queued.acquire("w", { waitMs: 15_000, owner: "second" });
    const third = queued.acquire("w", { waitMs: 15_000, owner: "third" });
    await eventually(async () => (await slots.stats("w")).waiting === 2);
    await first?.release();
    const got = await second;
    expect(got).not.toBeNull();
    expect(await slots.holders("w")).toMatchObject([{ owner: "second" }]);
    await got?.release();
    await (await third)?.release();

    const locks = lock(holder);
    const mine = await locks.acquire("wl");
    const next = lock(waiting).acquire("wl", { waitMs: 15_000, owner: "next" });
    await eventually(
      async () => (await redisStore(holder).lock.inspect({ storeKey: storeKey("lock", "lock", "wl") })).waiters.length === 1,
    );
    await mine?.release();
    expect(await next).not.toBeNull();
    expect(await locks.holder("wl")).toMatchObject({ owner: "next" });
  });
});

describe("least privilege: a permission the ACL lacks", () => {
  it("a command a script calls: named, with the fix, at once", async () => {
    const redis = await userWith("no-zadd", (rules) => rules.filter((rule) => rule !== "+zadd"));
    const error = await semaphore(redis, { limit: 2 })
      .acquire("p")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorePermissionError);
    expect(error).toMatchObject({ code: "ERR_STORE_PERMISSION", command: "zadd", store: "redis" });
    expect((error as Error).message).toMatch(
      /may not run ZADD \(in the script semaphore-[\w-]+\.lua\)\. Grant it: ACL SETUSER <user> \+zadd/,
    );

    const held = await lock(await userWith("no-pexpiretime", (rules) => rules.filter((rule) => rule !== "+pexpiretime"))).acquire(
      "q",
    );
    expect(held).not.toBeNull();
    // Held: the refusal reads when it ends, which this user may not.
    const refused = await lock(connectAs("no-pexpiretime", "pw"))
      .acquire("q")
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ command: "pexpiretime" });
    expect((refused as Error).message).toContain("+pexpiretime");
  });

  it("the scripts themselves, or the keys: named, with the fix", async () => {
    const noScripts = await userWith("no-evalsha", (rules) => rules.filter((rule) => rule !== "+evalsha"));
    const error = await semaphore(noScripts, { limit: 2 })
      .run("p", () => 1)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ command: "evalsha" });
    expect((error as Error).message).toContain("ACL SETUSER <user> +evalsha");

    const otherKeys = await userWith("other-keys", (rules) => rules.map((rule) => (rule.startsWith("~") ? "~{other:*" : rule)));
    const keys = await semaphore(otherKeys, { limit: 2 })
      .acquire("p")
      .catch((e: unknown) => e);
    expect(keys).toBeInstanceOf(StorePermissionError);
    expect(keys).toMatchObject({ command: "keys" });
    expect((keys as Error).message).toContain("ACL SETUSER <user> ~{semaphore:*");
  });

  it("the waiting room's channel: a waiter ends with the error at once, not when waitMs runs out", async () => {
    const holder = await userWith("channels-holder", (rules) => [...rules, "~{nochan:*", "&{nochan:*"]);
    const slots = semaphore(holder, { limit: 1, prefix: "nochan" });
    const first = await slots.acquire("c");
    const deaf = await userWith("no-channels", (rules) => [...rules.filter((rule) => !rule.startsWith("&")), "~{nochan:*"]);
    const started = performance.now();
    const error = await semaphore(deaf, { limit: 1, prefix: "nochan" })
      .acquire("c", { waitMs: 60_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorePermissionError);
    expect(error).toMatchObject({ command: "channels" });
    expect((error as Error).message).toContain("ACL SETUSER <user> &{nochan:*");
    // Ended by the refusal, far inside waitMs (a generous bound, not a figure under test).
    expect(performance.now() - started).toBeLessThan(30_000);
    expect((await slots.stats("c")).waiting).toBe(0);
    await first?.release();
  });
});
