import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { semaphore } from "../../src/index.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";
import { check, type LoadProcess, startLoad, stopLoads, type Verdict } from "./history.js";
import { report, rowFrom } from "./report.js";

export const servers: RedisServer[] = [];

export async function ownRedis(extra: string[] = []): Promise<RedisServer> {
  const server = await startRedisServer(extra);
  servers.push(server);
  return server;
}

/**
 * A private redis-server and a client to it for one test file: started before
 * its tests, stopped after. Read `.server` and `.redis` inside the tests.
 */
export function redisForFile(): { server: RedisServer; redis: Redis } {
  const own = {} as { server: RedisServer; redis: Redis };
  beforeAll(async () => {
    own.server = await ownRedis();
    own.redis = new Redis(own.server.url);
  });
  afterAll(async () => {
    own.redis.disconnect();
    await stopAll();
  });
  return own;
}

export async function stopAll(): Promise<void> {
  stopLoads();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface LoadSettings {
  processes: number;
  callers: number;
  limit: number;
  leaseMs: number;
  durationMs: number;
  holdMin?: number;
  holdMax?: number;
  extraEnv?: (index: number) => Record<string, string | number>;
}

/** Starts the load processes of one scenario against `url`, all on one semaphore. */
export function startLoads(url: string, prefix: string, settings: LoadSettings): LoadProcess[] {
  return Array.from({ length: settings.processes }, (_, index) =>
    startLoad({
      REDIS_URL: url,
      PREFIX: prefix,
      LIMIT: settings.limit,
      LEASE_MS: settings.leaseMs,
      CALLERS: settings.callers,
      DURATION_MS: settings.durationMs,
      HOLD_MIN: settings.holdMin ?? 5,
      HOLD_MAX: settings.holdMax ?? 60,
      ...(settings.extraEnv?.(index) ?? {}),
    }),
  );
}

/**
 * Holders left behind: the count must reach 0 within a lease (plus margin)
 * after the run. A key without an expiry, seen right after the run, counts
 * as a leak too (it would never leave), and so does any key still there
 * once the leases and waiter leases have all run out.
 */
export async function leaksAfter(url: string, prefix: string, leaseMs: number): Promise<number> {
  const client = new Redis(url, { maxRetriesPerRequest: 3 });
  client.on("error", () => {});
  try {
    const keys = async () => client.keys(`{${prefix}:*`);
    let leaks = 0;
    for (const key of await keys().catch(() => [])) if ((await client.pttl(key)) === -1) leaks++;
    const slots = semaphore(client, { prefix, limit: 1 });
    try {
      await eventually(async () => (await slots.count("k")) === 0 && (await keys()).length === 0, leaseMs + 8_000, 50);
    } catch {
      // reported below
    }
    return leaks + (await slots.count("k")) + (await keys()).length;
  } finally {
    client.disconnect();
  }
}

/** Runs the checker, records the row, and returns everything the test asserts on. */
export async function verdictOf(
  scenario: string,
  processes: LoadProcess[],
  settings: { url: string; prefix: string; limit: number; leaseMs: number },
  extraOk = true,
  notes?: string,
): Promise<{ verdict: Verdict; leaks: number }> {
  const verdict = check(processes, settings.limit);
  const leaks = await leaksAfter(settings.url, settings.prefix, settings.leaseMs);
  const ok = verdict.unexplained === 0 && leaks === 0 && verdict.operations > 0 && extraOk;
  report(rowFrom(scenario, verdict, leaks, ok, notes ?? verdict.problems.join("; ")));
  return { verdict, leaks };
}

/**
 * How long a scenario waits for its load processes to start work: each compiles the sources
 * with tsx on its way up, which takes seconds on a quiet machine and tens of them on a busy one.
 * Only a wait: a scenario's figures are taken from the processes' own histories.
 */
export const STARTING_MS = 90_000;

export const hrnow = (): bigint => process.hrtime.bigint();
export const msBetween = (a: bigint, b: bigint): number => Number(b - a) / 1e6;
