import { describe, expect, it } from "vitest";
import { lock, MAX_ID_LENGTH, memoryStore, redisStore, semaphore, ValidationError } from "../../src/index.js";
import { spyStore } from "../support/stores.js";

const factoryCases: [string, () => unknown, string, RegExp][] = [
  ["limit 0", () => semaphore({ limit: 0 }), "limit", /`limit` must be an integer of at least 1, got 0\. Pass how many/],
  ["limit -1", () => semaphore({ limit: -1 }), "limit", /got -1/],
  ["limit 1.5", () => semaphore({ limit: 1.5 }), "limit", /got 1\.5/],
  ["limit NaN", () => semaphore({ limit: Number.NaN }), "limit", /got NaN/],
  ["limit Infinity", () => semaphore({ limit: Number.POSITIVE_INFINITY }), "limit", /got Infinity/],
  ["limit as a string", () => semaphore({ limit: "20" as never }), "limit", /got "20"/],
  ["limit missing", () => semaphore({} as never), "limit", /`limit` is required/],
  ["leaseMs 0", () => semaphore({ limit: 1, leaseMs: 0 }), "leaseMs", /`leaseMs` must be a whole number of milliseconds/],
  ["leaseMs fractional", () => semaphore({ limit: 1, leaseMs: 10.5 }), "leaseMs", /got 10\.5/],
  ["leaseMs beyond a timer", () => semaphore({ limit: 1, leaseMs: 2 ** 31 }), "leaseMs", /from 1 to 2147483647/],
  ["ttlMs negative", () => lock({ ttlMs: -5 }), "ttlMs", /`ttlMs` must be a whole number/],
  ["retries negative", () => semaphore({ limit: 1, retries: -1 }), "retries", /non-negative integer, got -1/],
  ["retryDelayMs negative", () => lock({ retryDelayMs: -1 }), "retryDelayMs", /from 0 to 2147483647.*got -1/],
  [
    "retryDelayMs beyond a timer",
    () => lock({ retries: 1, retryDelayMs: 2 ** 31 }),
    "retryDelayMs",
    /`retryDelayMs` must be a whole number of milliseconds from 0 to 2147483647/,
  ],
  [
    "waitMs beyond a timer",
    () => semaphore({ limit: 1, waitMs: 2 ** 31 }),
    "waitMs",
    /`waitMs` must be a whole number of milliseconds from 0 to 2147483647.*Pass the longest/,
  ],
  [
    "heartbeat above half",
    () => semaphore({ limit: 1, leaseMs: 1000, heartbeatMs: 600 }),
    "heartbeatMs",
    /at most half of leaseMs \(1000\)/,
  ],
  ["heartbeat zero", () => lock({ heartbeatMs: 0 }), "heartbeatMs", /heartbeatMs/],
  ["onRenewError not a function", () => lock({ onRenewError: "log" as never }), "onRenewError", /must be a function/],
  ["unknown option with a typo", () => semaphore({ limit: 1, leseMs: 10 } as never), "leseMs", /Did you mean `leaseMs`\?/],
  ["unknown option", () => lock({ bogus: true } as never), "bogus", /unknown option `bogus` for lock\. Known options/],
  ["semaphore option on a lock", () => lock({ leaseMs: 1000 } as never), "leaseMs", /unknown option `leaseMs` for lock/],
  ["empty prefix", () => lock({ prefix: "" }), "prefix", /non-empty string/],
  ["prefix with braces", () => semaphore({ limit: 1, prefix: "a{b}" }), "prefix", /Redis Cluster hash tag/],
  ["prefix with a colon", () => lock({ prefix: "api:v2" }), "prefix", /must not contain ":".*"myapp-locks"/],
  [
    "client of the wrong kind",
    () => semaphore({ client: 42 as never, limit: 1 }),
    "client",
    /ioredis or iovalkey Redis or Cluster, or a node-redis client \(createClient\(\)\) or cluster \(createCluster\(\)\)/,
  ],
  ["client twice", () => lock(memoryStore(), { client: memoryStore() } as never), "client", /client twice/],
  ["options not an object", () => semaphore("20" as never), "options", /must be an object/],
  [
    "redisStore without a client",
    () => redisStore({} as never),
    "client",
    /needs a Redis client: an ioredis or iovalkey Redis or Cluster, or a node-redis client/,
  ],
  [
    "redisStore timeout",
    () => redisStore({ evalsha: () => 0, eval: () => 0 } as never, { timeoutMs: 0 }),
    "timeoutMs",
    /timeoutMs/,
  ],
];

describe("bad options are refused when the factory is called", () => {
  it.each(factoryCases)("%s", (_, make, option, message) => {
    let thrown: unknown;
    try {
      make();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect(thrown).toMatchObject({ option, code: "ERR_LEASEHOLD_VALIDATION" });
    expect((thrown as Error).message).toMatch(message);
  });
});

describe("bad call input is refused before any slot is taken", () => {
  const { store, calls } = spyStore(memoryStore());
  const slots = semaphore({ client: store, limit: 2 });
  const locks = lock({ client: store });
  const work = async () => "ran";

  const callCases: [string, () => Promise<unknown>, string, RegExp][] = [
    ["empty id", () => slots.acquire(""), "id", /non-empty string/],
    ["id not a string", () => locks.acquire(42 as never), "id", /got 42/],
    ["id too long", () => slots.run("x".repeat(MAX_ID_LENGTH + 1), work), "id", /at most 1024/],
    ["id with a newline", () => locks.run("a\nb", work), "id", /control characters/],
    ["id with a NUL", () => slots.acquire("a\u0000"), "id", /control characters/],
    ["weight above the limit", () => slots.run("k", work, { weight: 3 }), "weight", /above the limit 2/],
    ["weight zero", () => slots.acquire("k", { weight: 0 }), "weight", /at least 1/],
    ["call limit zero", () => slots.acquire("k", { limit: 0 }), "limit", /at least 1/],
    ["call lease fractional", () => slots.run("k", work, { leaseMs: 0.5 }), "leaseMs", /got 0\.5/],
    [
      "call heartbeat above half",
      () => locks.run("k", work, { ttlMs: 100, heartbeatMs: 60 }),
      "heartbeatMs",
      /at most half of ttlMs \(100\)/,
    ],
    ["call retries fractional", () => locks.acquire("k", { retries: 0.5 }), "retries", /got 0\.5/],
    ["call waitMs beyond a timer", () => slots.acquire("k", { waitMs: 2 ** 31 }), "waitMs", /from 0 to 2147483647/],
    [
      "call retryDelayMs beyond a timer",
      () => locks.run("k", work, { retries: 1, retryDelayMs: 2 ** 31 }),
      "retryDelayMs",
      /from 0 to 2147483647/,
    ],
    [
      "heartbeat on acquire",
      () => slots.acquire("k", { heartbeatMs: 10 } as never),
      "heartbeatMs",
      /unknown option `heartbeatMs` for semaphore acquire/,
    ],
    ["typo in a call option", () => locks.run("k", work, { ttl: 10 } as never), "ttl", /Did you mean `ttlMs`\?/],
    ["run without a function", () => slots.run("k", "work" as never), "fn", /needs a function/],
    ["extend with a bad length", async () => (await locks.acquire("ext"))?.extend(-1), "ms", /`ms` must be a whole number/],
  ];

  it.each(callCases)("%s", async (_, call, option, message) => {
    const before = calls.semaphoreAcquire + calls.lockAcquire;
    const error = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ option });
    expect((error as Error).message).toMatch(message);
    if (option !== "ms") expect(calls.semaphoreAcquire + calls.lockAcquire).toBe(before);
    expect(await slots.count("k")).toBe(0);
  });

  it("a limit function that returns nonsense is refused before any slot", async () => {
    const dynamic = semaphore({ client: store, limit: () => -3 });
    await expect(dynamic.acquire("k")).rejects.toMatchObject({ option: "limit" });
    const throwing = semaphore({
      client: store,
      limit: () => {
        throw new Error("no tenant");
      },
    });
    await expect(throwing.run("k", work)).rejects.toThrow(/limit function threw for "k": no tenant/);
  });
});
