import { afterEach, describe, expect, it } from "vitest";
import { PROBLEM_TYPES } from "../../integrations/express/index.js";
import { redisStore, semaphore } from "../../src/index.js";
import { exitOf, killChildren, spawnChild } from "../support/child.js";
import { newRedis, redisUrl, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

afterEach(() => killChildren());

interface Answer {
  status: number;
  type: string | null;
  body: Record<string, unknown>;
}

async function get(url: string): Promise<Answer> {
  // A connection per request: a kept-alive one would be the server's to close, not the test's concern.
  const response = await fetch(url, { headers: { connection: "close" } });
  const text = await response.text();
  return { status: response.status, type: response.headers.get("content-type"), body: text === "" ? {} : JSON.parse(text) };
}

describe.each(["express", "fastify", "hono", "nest"])("SIGTERM on %s over Redis", (framework) => {
  it("tells requests in flight, answers later ones 503 shutting-down, frees every permit, and the process exits by itself", async () => {
    const prefix = uniquePrefix("sigterm");
    const child = spawnChild("test/support/shutdown-app.ts", {
      REDIS_URL: redisUrl(),
      FRAMEWORK: framework,
      PREFIX: prefix,
      GRACE_MS: "3000",
    });
    const { port } = await child.next("listening");
    const base = `http://127.0.0.1:${port}`;
    const seen = semaphore({ client: redisStore(newRedis()), limit: 1, prefix });
    const entered = (route: string) => child.events.filter((event) => event.event === "entered" && event.route === route).length;

    const polite = get(`${base}/polite`);
    const stubborn = get(`${base}/stubborn`);
    const holding = get(`${base}/queue`);
    await eventually(() => entered("polite") === 1 && entered("stubborn") === 1 && entered("queue") === 1);
    const queued = get(`${base}/queue`);
    await eventually(async () => (await seen.stats("queue")).waiting === 1);

    child.process.kill("SIGTERM");
    await child.next("closing");
    // Arrived after close() began: refused at once, while the grace of the others runs.
    const late = await get(`${base}/polite`);
    expect(late.status).toBe(503);
    expect(late.type).toContain("application/problem+json");
    expect(late.body.type).toBe(PROBLEM_TYPES["shutting-down"]);
    expect(late.body.type).toBe("urn:leasehold:problem:shutting-down");

    // In flight and stopping when told: they finish with their own answer.
    expect(await polite).toMatchObject({ status: 200, body: { stopped: "ShutdownError" } });
    expect(await holding).toMatchObject({ status: 200, body: { stopped: "ShutdownError" } });
    // Waiting in the queue: refused, its place given up.
    expect(await queued).toMatchObject({ status: 503, body: { type: PROBLEM_TYPES["shutting-down"] } });
    // Still at work when the grace ended: its permit is taken back, and it is answered as shutting down.
    expect(await stubborn).toMatchObject({ status: 503, body: { type: PROBLEM_TYPES["shutting-down"] } });

    await child.next("closed");
    for (const id of ["polite", "stubborn", "queue"]) {
      expect(await seen.stats(id)).toMatchObject({ used: 0, waiting: 0 });
    }
    expect(entered("polite")).toBe(1);
    expect(await exitOf(child)).toEqual({ code: 0, signal: null });
  }, 60_000);
});
