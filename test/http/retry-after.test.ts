import { createServer } from "node:http";
import express from "express";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { semaphore } from "../../integrations/express/index.js";
import { memoryStore } from "../../src/index.js";
import { gate } from "../support/stores.js";

/** An app whose one route holds its permit until the test opens the gate of that request. */
function app(options: Parameters<typeof semaphore>[2] = {}) {
  const gates: (() => void)[] = [];
  const server = express();
  server.get("/", semaphore("ra", 1, { client: memoryStore(), ...options }), async (_req, res) => {
    const { opened, open } = gate();
    gates.push(open);
    await opened;
    res.end("ok");
  });
  return { http: createServer(server), gates };
}

describe("Retry-After", () => {
  it("is the nearest lease expiry before any request finished, then the hold time observed", async () => {
    const { http, gates } = app({ leaseMs: 60_000 });
    const first = request(http)
      .get("/")
      .then((r) => r);
    while (gates.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    // Nothing has been observed yet: the honest upper bound is the holder's lease.
    const early = await request(http).get("/");
    expect(early.status).toBe(503);
    expect(Number(early.headers["retry-after"])).toBeGreaterThanOrEqual(59);
    gates[0]?.();
    await first;
    // Short holds observed: the estimate follows them, not the 60 s lease.
    const second = request(http)
      .get("/")
      .then((r) => r);
    while (gates.length === 1) await new Promise((resolve) => setTimeout(resolve, 5));
    const later = await request(http).get("/");
    expect(later.status).toBe(503);
    expect(later.headers["retry-after"]).toBe("1");
    gates[1]?.();
    await second;
  });

  it("can be set as a number or computed from the rejection", async () => {
    for (const [retryAfter, expected] of [
      [7, "7"],
      [(rejection: { retryAfter: number }) => rejection.retryAfter * 10 + 0.2, null],
    ] as const) {
      const { http, gates } = app({ retryAfter: retryAfter as never });
      const held = request(http)
        .get("/")
        .then((r) => r);
      while (gates.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const refused = await request(http).get("/");
      const value = Number(refused.headers["retry-after"]);
      if (expected !== null) expect(refused.headers["retry-after"]).toBe(expected);
      else expect(value % 10).toBe(1); // ten times the estimate, rounded up: whole seconds
      expect(JSON.parse(refused.text).retryAfter).toBe(value);
      gates[0]?.();
      await held;
    }
  });
});
