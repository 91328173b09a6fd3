import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { lock as lockGuard, semaphore as semaphoreGuard } from "../../integrations/express/index.js";
import { semaphore as honoSemaphore } from "../../integrations/hono/index.js";
import { Semaphore as NestSemaphore } from "../../integrations/nestjs/index.js";
import {
  LeaseholdError,
  lock,
  MAX_ID_LENGTH,
  redisStore,
  StoreUnavailableError,
  semaphore,
  ValidationError,
} from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { eventually } from "../support/stores.js";
import { redisForFile } from "./harness.js";
import { report } from "./report.js";

const own = redisForFile();

type Case = [string, () => unknown, RegExp];

describe("13. bad input", () => {
  it("13. at least 40 bad inputs across the engine, the adapters and a misbehaving store: clear errors, no leaks, the server keeps serving", async () => {
    const slots = semaphore(own.redis, { limit: 2, prefix: "bad" });
    const locks = lock(own.redis, { prefix: "badlock" });
    const work = async () => "ran";
    const garbled = (reply: unknown): Store => {
      const real = redisStore(own.redis);
      return Object.assign(Object.create(real) as Store, {
        kind: "garbled",
        semaphore: { ...real.semaphore, acquire: async () => reply as never },
        lock: { ...real.lock, acquire: async () => reply as never },
      });
    };

    const engine: Case[] = [
      ["limit 0", () => semaphore(own.redis, { limit: 0 }), /`limit` must be an integer of at least 1/],
      ["limit -1", () => semaphore(own.redis, { limit: -1 }), /got -1/],
      ["limit 1.5", () => semaphore(own.redis, { limit: 1.5 }), /got 1\.5/],
      ["limit NaN", () => semaphore(own.redis, { limit: Number.NaN }), /got NaN/],
      ["limit Infinity", () => semaphore(own.redis, { limit: Number.POSITIVE_INFINITY }), /got Infinity/],
      ["limit as a string", () => semaphore(own.redis, { limit: "20" as never }), /got "20"/],
      ["limit missing", () => semaphore(own.redis, {} as never), /`limit` is required/],
      ["leaseMs 0", () => semaphore(own.redis, { limit: 1, leaseMs: 0 }), /`leaseMs` must be a whole number of milliseconds/],
      ["leaseMs a string", () => semaphore(own.redis, { limit: 1, leaseMs: "60s" as never }), /got "60s"/],
      ["ttlMs negative", () => lock(own.redis, { ttlMs: -1 }), /`ttlMs`/],
      ["retries negative", () => lock(own.redis, { retries: -2 }), /non-negative integer/],
      ["retryDelayMs fractional", () => lock(own.redis, { retryDelayMs: 0.5 }), /retryDelayMs/],
      [
        "heartbeat above half",
        () => semaphore(own.redis, { limit: 1, leaseMs: 1000, heartbeatMs: 501 }),
        /at most half of leaseMs \(1000\)/,
      ],
      ["unknown option (typo)", () => semaphore(own.redis, { limit: 1, leaseMS: 5 } as never), /Did you mean `leaseMs`/],
      ["unknown option", () => lock(own.redis, { colour: "red" } as never), /unknown option `colour`/],
      ["prefix with braces", () => lock(own.redis, { prefix: "{x}" }), /hash tag/],
      ["client a number", () => lock(42 as never, {}), /`client` must be/],
      ["waitMs with retries", () => lock(own.redis, { waitMs: 10, retries: 2 }), /pass one of them/],
      ["maxQueue 0", () => lock(own.redis, { maxQueue: 0 }), /`maxQueue`/],
      ["empty id", () => slots.acquire(""), /non-empty string/],
      ["id not a string", () => locks.acquire({} as never), /non-empty string/],
      ["huge id", () => slots.run("x".repeat(MAX_ID_LENGTH + 1), work), /at most 1024/],
      ["id with a newline", () => locks.run("order\n42", work), /control characters/],
      ["id with an escape character", () => slots.acquire("\u001b[31m"), /control characters/],
      ["weight above the limit", () => slots.run("k", work, { weight: 3 }), /above the limit 2/],
      ["signal not a signal", () => slots.acquire("k", { signal: {} as never }), /`signal` must be an AbortSignal/],
      ["run without a body", () => locks.run("k", undefined as never), /needs a function/],
      ["extend with a negative length", async () => (await locks.acquire("ext"))?.extend(-5), /`ms` must be a whole number/],
    ];
    const adapters: Case[] = [
      ["Express limit 0", () => semaphoreGuard("x", 0), /`limit`/],
      ["Express empty name", () => lockGuard(""), /lease name/],
      ["Express status 302", () => lockGuard("x", { status: 302 }), /`status` must be an HTTP error status/],
      ["Express key a string", () => semaphoreGuard("x", 1, { key: "x-tenant" as never }), /`key` must be a function/],
      [
        "Express onStoreError typo",
        () => semaphoreGuard("x", 1, { onStoreError: "open" as never }),
        /"fail-closed" or "fail-open"/,
      ],
      ["Hono unknown option", () => honoSemaphore("x", 1, { tenants: 1 } as never), /unknown option `tenants`/],
      ["Hono tenant not a function", () => honoSemaphore("x", 1, { tenant: 1, tenantLimit: 1 } as never), /`tenant`/],
      ["Hono retryAfter negative", () => honoSemaphore("x", 1, { retryAfter: -1 }), /`retryAfter`/],
      ["NestJS limit as a string", () => NestSemaphore("x", "20" as never), /`limit`/],
      ["NestJS heartbeat above half", () => NestSemaphore("x", 1, { leaseMs: 100, heartbeatMs: 80 }), /at most half/],
    ];
    const stores: Case[] = [
      ["store answers a string", () => semaphore(garbled("OK"), { limit: 1 }).acquire("k"), /not a valid reply/],
      ["store answers null", () => lock(garbled(null), {}).acquire("k"), /not a valid reply/],
      [
        "store answers a negative delay",
        () => semaphore(garbled({ acquired: false, retryAfterMs: -1 }), { limit: 1 }).acquire("k"),
        /not a valid reply/,
      ],
    ];

    let passed = 0;
    const failures: string[] = [];
    for (const [name, make, message] of [...engine, ...adapters, ...stores]) {
      let error: unknown;
      try {
        await make();
      } catch (thrown) {
        error = thrown;
      }
      const expectedClass = stores.some(([n]) => n === name) ? StoreUnavailableError : ValidationError;
      if (error instanceof expectedClass && error instanceof LeaseholdError && message.test(error.message)) passed++;
      else failures.push(`${name}: ${String(error)}`);
    }

    // Request-derived keys: a missing tenant header, a 10 KB header. Each a clear error on the error path; then it keeps serving.
    const app = express();
    app.get(
      "/t",
      semaphoreGuard("tenant", 2, { client: own.redis, prefix: "badhttp", key: (req) => req.get("x-tenant") ?? "" }),
      (_req, res) => res.json({ ok: true }),
    );
    app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(error instanceof ValidationError ? 400 : 500).json({ message: error.message });
    });
    const missing = await request(app).get("/t");
    const huge = await request(app)
      .get("/t")
      .set("x-tenant", "t".repeat(10 * 1024));
    const fine = await request(app).get("/t").set("x-tenant", "acme");
    const httpCases = [
      missing.status === 400 && /returned an empty string/.test(missing.body.message),
      huge.status === 400 && /at most 1024/.test(huge.body.message),
      fine.status === 200,
    ];
    passed += httpCases.filter(Boolean).length;
    if (!httpCases.every(Boolean)) failures.push(`http: ${missing.status} ${huge.status} ${fine.status}`);

    // The adapter releases on the response's `finish`, which may be a moment after the client has the response.
    const keysLeft = async () =>
      (await own.redis.keys("*bad*")).filter((key) => !key.startsWith(storeKey("badlock", "lock", "ext")));
    await eventually(async () => (await keysLeft()).length === 0, 5000).catch(() => {});
    const leftovers = await keysLeft();
    const total = engine.length + adapters.length + stores.length + httpCases.length;
    report({
      scenario: "13. bad input",
      operations: total,
      maxHolders: "-",
      declaredLosses: 0,
      leaks: leftovers.length,
      verdict: failures.length === 0 && leftovers.length === 0 ? "pass" : "FAIL",
      notes: `${passed}/${total} refused clearly`,
    });
    expect(failures).toEqual([]);
    expect(total).toBeGreaterThanOrEqual(40);
    expect(leftovers).toEqual([]);
  });
});
