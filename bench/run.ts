// npm run bench [-- --quick]: leasehold (as built in dist/, what users run)
// side by side with what users would
// pick instead, in one run on this machine, reported as ratios (absolute
// figures on a shared 2-core machine are noise; ratios measured together are
// not). Writes bench/results.json and one SVG chart per scenario.
import { spawn } from "node:child_process";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { Sema } from "async-sema";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import pLimit from "p-limit";
import { createClient } from "redis";
import { Semaphore as RedisSemaphore } from "redis-semaphore";
import { CHANNELS, memoryStore, redisStore, SemaphoreLeaseLostError, semaphore } from "../dist/esm/src/index.js";
import { storeKey } from "../dist/esm/src/store/contract/keys.js";
import type { Store } from "../dist/esm/src/store/index.js";
import { freePort, startRedisServer } from "../test/support/redis-server.js";
import { cycles, medianOf, round, type Sample, summarize } from "./measure.js";
import { barChart } from "./svg.js";

const quick = process.argv.includes("--quick");
// --only=redisCycles,httpOverhead runs some scenarios (by function name) and writes no results files.
const only = process.argv
  .find((arg) => arg.startsWith("--only="))
  ?.slice("--only=".length)
  .split(",");
const ms = (full: number, fast: number) => (quick ? fast : full);
const rounds = quick ? 1 : 3;

interface Target {
  target: string;
  value: number;
  goal: number;
  pass: boolean;
}
interface Scenario {
  name: string;
  unit: string;
  rows: Record<string, number | string>[];
  bars: { label: string; value: number }[];
  targets: Target[];
}
const scenarios: Scenario[] = [];
const target = (name: string, value: number, goal: number, atMost = false): Target => ({
  target: name,
  value: round(value, 3),
  goal,
  pass: atMost ? value <= goal : value >= goal,
});

const server = await startRedisServer();
const redis = new Redis(server.url);
const admin = new Redis(server.url);

async function commands(): Promise<Record<string, number>> {
  const stats = await admin.info("commandstats");
  return Object.fromEntries(
    [...stats.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)].map(([, name, calls]) => [name as string, Number(calls)]),
  );
}
const sent = (before: Record<string, number>, after: Record<string, number>) =>
  ["evalsha", "eval"].reduce((sum, name) => sum + ((after[name] ?? 0) - (before[name] ?? 0)), 0);

/** The least a client can do for one cycle: a script that admits under a limit, then a ZREM. */
const floorScript = `if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) return 1 end return 0`;

/** 1. One acquire + release cycle on Redis: leasehold, redis-semaphore, and bare ioredis doing the least possible. */
async function redisCycles(): Promise<void> {
  const floorSha = (await redis.script("LOAD", floorScript)) as string;
  const slots = semaphore(redis, { limit: 100_000, prefix: "bench-cycle" });
  let n = 0;
  const subjects: [string, () => Promise<unknown>][] = [
    [
      "bare ioredis (floor)",
      async () => {
        const token = `t${n++}`;
        await redis.evalsha(floorSha, 1, "floor", token, 100_000, Date.now() + 60_000);
        await redis.zrem("floor", token);
      },
    ],
    [
      "leasehold",
      async () => {
        const lease = await slots.acquire("k");
        await lease?.release();
      },
    ],
    [
      "redis-semaphore",
      async () => {
        const held = new RedisSemaphore(redis, "rs-cycle", 100_000, { refreshInterval: 0, acquireAttemptsLimit: 1 });
        await held.acquire();
        await held.release();
      },
    ],
  ];
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  const at: Record<number, Record<string, Sample>> = {};
  for (const concurrency of [1, 8, 64]) {
    const results: Record<string, Sample[]> = {};
    for (let r = 0; r < rounds; r++) {
      for (const [name, op] of subjects) {
        const sample = await cycles(op, concurrency, ms(2000, 400));
        results[name] = [...(results[name] ?? []), sample];
      }
    }
    for (const [name] of subjects) {
      const sample = medianOf(results[name] as Sample[]);
      at[concurrency] = { ...at[concurrency], [name]: sample };
      rows.push({
        subject: name,
        concurrency,
        "cycles/s": Math.round(sample.opsPerSec),
        "p50 ms": round(sample.p50),
        "p99 ms": round(sample.p99),
      });
      bars.push({ label: `${name} @${concurrency}`, value: sample.opsPerSec });
    }
  }
  const versus = (concurrency: number, other: string) => {
    const samples = at[concurrency] as Record<string, Sample>;
    return (samples.leasehold as Sample).opsPerSec / (samples[other] as Sample).opsPerSec;
  };
  scenarios.push({
    name: "redis-cycle",
    unit: "cycles/s",
    rows,
    bars,
    targets: [
      target("cycles/s at 1 vs redis-semaphore", versus(1, "redis-semaphore"), 1),
      target("cycles/s at 8 vs redis-semaphore", versus(8, "redis-semaphore"), 1),
      target("cycles/s at 64 vs redis-semaphore", versus(64, "redis-semaphore"), 2),
      target("cycles/s at 64 vs the bare-ioredis floor (for reference)", versus(64, "bare ioredis (floor)"), 1),
    ],
  });
}

/**
 * 1b. The same cycle at concurrency 64 through each client library: leasehold
 * over ioredis and over node-redis, in interleaved rounds, beside each
 * library's bare floor (two plain commands a cycle, no coalescing: what the
 * library itself costs here).
 */
async function clientCycles(): Promise<void> {
  const nodeRedis = createClient({ url: server.url });
  await nodeRedis.connect();
  const floorSha = (await redis.script("LOAD", floorScript)) as string;
  const viaIoredis = semaphore(redis, { limit: 100_000, prefix: "bench-client-io" });
  const viaNodeRedis = semaphore(nodeRedis, { limit: 100_000, prefix: "bench-client-nr" });
  let n = 0;
  const subjects: [string, () => Promise<unknown>][] = [
    [
      "bare ioredis (floor)",
      async () => {
        const token = `t${n++}`;
        await redis.evalsha(floorSha, 1, "floor-io", token, 100_000, Date.now() + 60_000);
        await redis.zrem("floor-io", token);
      },
    ],
    [
      "bare node-redis (floor)",
      async () => {
        const token = `t${n++}`;
        await nodeRedis.evalSha(floorSha, { keys: ["floor-nr"], arguments: [token, "100000", String(Date.now() + 60_000)] });
        await nodeRedis.zRem("floor-nr", token);
      },
    ],
    ["leasehold via ioredis", async () => (await viaIoredis.acquire("k"))?.release()],
    ["leasehold via node-redis", async () => (await viaNodeRedis.acquire("k"))?.release()],
  ];
  const results: Record<string, Sample[]> = {};
  for (let r = 0; r < rounds; r++) {
    for (const [name, op] of subjects) results[name] = [...(results[name] ?? []), await cycles(op, 64, ms(2000, 400))];
  }
  const at: Record<string, Sample> = {};
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  for (const [name] of subjects) {
    const sample = medianOf(results[name] as Sample[]);
    at[name] = sample;
    rows.push({
      subject: name,
      concurrency: 64,
      "cycles/s": Math.round(sample.opsPerSec),
      "p50 ms": round(sample.p50),
      "p99 ms": round(sample.p99),
    });
    bars.push({ label: `${name} @64`, value: sample.opsPerSec });
  }
  const rate = (name: string) => (at[name] as Sample).opsPerSec;
  nodeRedis.destroy();
  scenarios.push({
    name: "client-cycle",
    unit: "cycles/s",
    rows,
    bars,
    targets: [
      target(
        "leasehold via node-redis vs via ioredis, cycles/s at 64",
        rate("leasehold via node-redis") / rate("leasehold via ioredis"),
        0.8,
      ),
    ],
  });
}

/** 2. Limit 16, 64 callers, a 5 ms body: how much of limit/body gets through, and how long callers wait. */
async function contended(): Promise<void> {
  const limit = 16;
  const bodyMs = 5;
  const callers = 64;
  const duration = ms(4000, 1000);
  const ideal = limit / (bodyMs / 1000);
  const body = () => new Promise((resolve) => setTimeout(resolve, bodyMs));
  // Why a hand-off costs what it does (bench/HISTORY.md, "Contended hand-off, third round"): how long
  // a release takes as its caller sees it, and how many releases start in one turn of the event
  // loop (bodies started in one turn end in one: the store then runs their releases back to back,
  // and answers them together).
  let releaseMs = 0;
  let releases = 0;
  let turns = 0;
  let inTurn = 0;
  const endTurn = () => {
    turns++;
    inTurn = 0;
  };
  const run = async (acquireAndHold: () => Promise<() => Promise<unknown>>) => {
    const waits: number[] = [];
    releaseMs = releases = turns = inTurn = 0;
    const started = performance.now();
    const until = started + duration;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        while (performance.now() < until) {
          const t0 = performance.now();
          const release = await acquireAndHold();
          waits.push(performance.now() - t0);
          await body();
          const t1 = performance.now();
          if (inTurn++ === 0) setImmediate(endTurn);
          await release();
          releaseMs += performance.now() - t1;
          releases++;
        }
      }),
    );
    return summarize(waits, (performance.now() - started) / 1000);
  };
  const fifo = semaphore({ client: redis, limit, prefix: "bench-fifo" });
  // What the body's timer alone allows: a hand-off that costs nothing (in process, no store, no
  // lease). setTimeout(5) fires after 5 ms and a bit more, so limit/body is never reached.
  const ceiling = new Sema(limit);
  const spin = semaphore({ client: redis, limit, prefix: "bench-spin" });
  const subjects: [string, () => Promise<() => Promise<unknown>>][] = [
    [
      "in-process hand-off (ceiling)",
      async () => {
        await ceiling.acquire();
        return async () => ceiling.release();
      },
    ],
    [
      "leasehold queue (waitMs)",
      async () => {
        const lease = await fifo.acquire("k", { waitMs: 30_000 });
        return () => lease?.release() as Promise<boolean>;
      },
    ],
    [
      "leasehold spin (retries)",
      async () => {
        const lease = await spin.acquire("k", { retries: 100_000, retryDelayMs: 10 });
        return () => lease?.release() as Promise<boolean>;
      },
    ],
    [
      "redis-semaphore (polling)",
      async () => {
        const held = new RedisSemaphore(redis, "rs-contended", limit, {
          refreshInterval: 0,
          retryInterval: 10,
          acquireTimeout: 30_000,
        });
        await held.acquire();
        return () => held.release();
      },
    ],
  ];
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  const results: Record<string, Sample> = {};
  for (const [name, acquire] of subjects) {
    const sample = await run(acquire);
    results[name] = sample;
    rows.push({
      subject: name,
      "ops/s": Math.round(sample.opsPerSec),
      "of limit/body": round(sample.opsPerSec / ideal, 3),
      "wait p50 ms": round(sample.p50),
      "wait p99 ms": round(sample.p99),
      "release ms": round(releaseMs / Math.max(releases, 1), 3),
      "releases per turn": round(releases / Math.max(turns, 1), 1),
    });
    bars.push({ label: name, value: sample.opsPerSec });
  }
  const queue = results["leasehold queue (waitMs)"] as Sample;
  const polling = results["redis-semaphore (polling)"] as Sample;
  scenarios.push({
    name: "contended-handoff",
    unit: "ops/s",
    rows,
    bars,
    targets: [
      target("queue throughput vs limit/body", queue.opsPerSec / ideal, 0.9),
      target(
        "queue throughput vs the in-process ceiling (for reference)",
        queue.opsPerSec / (results["in-process hand-off (ceiling)"] as Sample).opsPerSec,
        0.9,
      ),
      target("queue wait p99 vs redis-semaphore's", queue.p99 / Math.max(polling.p99, 1e-9), 0.2, true),
    ],
  });
}

/** 3. Redis commands per request, from INFO commandstats: 2 per uncontended request, plus heartbeats. */
async function commandsPerRequest(): Promise<void> {
  const slots = semaphore({ client: redis, limit: 100, prefix: "bench-commands" });
  const requests = ms(2000, 300);
  let before = await commands();
  for (let n = 0; n < requests; n++) await slots.run("k", async () => {});
  const quickBody = sent(before, await commands()) / requests;
  before = await commands();
  const slow = 20;
  await Promise.all(
    Array.from({ length: slow }, () =>
      slots.run("k", () => new Promise((resolve) => setTimeout(resolve, 450)), { leaseMs: 400, heartbeatMs: 100 }),
    ),
  );
  const slowBody = sent(before, await commands()) / slow;
  scenarios.push({
    name: "commands-per-request",
    unit: "commands",
    rows: [
      { request: "uncontended, body shorter than a heartbeat", "commands/request": round(quickBody, 3) },
      { request: "450 ms body, 100 ms heartbeat (4 renewals)", "commands/request": round(slowBody, 3) },
    ],
    bars: [
      { label: "short body", value: quickBody },
      { label: "450 ms body, 4 heartbeats", value: slowBody },
    ],
    targets: [target("commands per uncontended request (exactly 2)", quickBody, 2, true), target("at least 2", quickBody, 2)],
  });
}

/** 4. The same trivial route in each framework: unguarded, guarded on memory, guarded on Redis, refusing. */
async function httpOverhead(): Promise<void> {
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  const targets: Target[] = [];
  // BENCH_FRAMEWORKS=fastify (with --only=httpOverhead) measures some of them.
  for (const framework of (process.env.BENCH_FRAMEWORKS ?? "express,hono,nestjs,fastify").split(",")) {
    // Every variant runs at once, in one server process (idle until driven), and the rounds
    // interleave them: a slow moment of this shared machine then costs every variant alike,
    // and the median drops it.
    // Hono also as `wrap(handler)`, the guard as one handler (docs/adapters.md): a route Hono serves
    // without its async middleware chain.
    const modes = ["none", "async", "memory", "redis", "rejecting"];
    if (framework === "hono") modes.push("wrapped", "redis-wrapped");
    // Fastify also beside @fastify/rate-limit on the same route, local and on Redis.
    if (framework === "fastify") modes.push("rate-limit", "rate-limit-redis");
    const ports: number[] = [];
    for (const _ of modes) ports.push(await freePort());
    const child = spawn(process.execPath, ["--import", "tsx", "bench/http-server.ts"], {
      env: { ...process.env, FRAMEWORK: framework, MODES: modes.join(","), PORTS: ports.join(","), REDIS_URL: server.url },
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise<void>((resolve) => child.stdout?.on("data", (data) => String(data).includes("listening") && resolve()));
    const urls = Object.fromEntries(modes.map((mode, i) => [mode, `http://127.0.0.1:${ports[i]}/`]));
    for (const url of Object.values(urls)) {
      await autocannon({ url, connections: 64, duration: ms(0.5, 0.3) }); // warm-up
    }
    const runs: Record<string, autocannon.Result[]> = Object.fromEntries(modes.map((mode) => [mode, []]));
    for (let round = 0; round < rounds; round++) {
      for (const mode of modes) {
        runs[mode]?.push(await autocannon({ url: urls[mode] as string, connections: 64, duration: ms(1.5, 0.75) }));
      }
    }
    child.kill();
    const results: Record<string, autocannon.Result> = {};
    for (const mode of modes) {
      const sorted = [...(runs[mode] ?? [])].sort((a, b) => a.requests.average - b.requests.average);
      results[mode] = sorted[Math.floor(sorted.length / 2)] as autocannon.Result;
    }
    const base = results.none as autocannon.Result;
    for (const [mode, result] of Object.entries(results)) {
      rows.push({
        framework,
        route:
          mode === "none"
            ? "unguarded"
            : mode === "async"
              ? "no-op async middleware"
              : mode === "rejecting"
                ? "guarded, every request refused"
                : mode.startsWith("rate-limit")
                  ? `@fastify/rate-limit, ${mode === "rate-limit" ? "local" : "redis"} store`
                  : mode.endsWith("wrapped")
                    ? `guarded by wrap(handler), ${mode === "wrapped" ? "memory" : "redis"} store`
                    : `guarded, ${mode} store`,
        "req/s": Math.round(result.requests.average),
        "vs unguarded": round(result.requests.average / base.requests.average, 3),
        "p50 ms": result.latency.p50,
        "p99 ms": result.latency.p99,
        "added p99 ms": round(result.latency.p99 - base.latency.p99),
      });
      bars.push({ label: `${framework} ${mode}`, value: result.requests.average });
    }
    targets.push(
      target(
        `${framework}: Redis-guarded req/s vs unguarded`,
        (results.redis as autocannon.Result).requests.average / base.requests.average,
        0.8,
      ),
    );
    targets.push(
      target(
        `${framework}: memory-guarded req/s vs unguarded`,
        (results.memory as autocannon.Result).requests.average / base.requests.average,
        0.9,
      ),
    );
    if (results.wrapped !== undefined && results["redis-wrapped"] !== undefined) {
      targets.push(
        target(
          `${framework} wrap: Redis-guarded req/s vs unguarded`,
          results["redis-wrapped"].requests.average / base.requests.average,
          0.8,
        ),
      );
      targets.push(
        target(
          `${framework} wrap: memory-guarded req/s vs unguarded`,
          results.wrapped.requests.average / base.requests.average,
          0.9,
        ),
      );
    }
    targets.push(
      target(
        `${framework}: refusing vs admitting (memory), req/s`,
        (results.rejecting as autocannon.Result).requests.average / (results.memory as autocannon.Result).requests.average,
        1,
      ),
    );
  }
  scenarios.push({ name: "http-overhead", unit: "req/s", rows, bars, targets });
}

/**
 * 5. In process: the memory store against p-limit and async-sema, same loop shape. Fail fast
 * (64 loops, limit 64: nobody waits) and queueing (64 loops through limit 16, waitMs: callers
 * wait their turn, as p-limit's queue does); the same limit 16 also with 1 and 8 loops (issue #12),
 * where nobody waits: what the queueing path costs when it is not needed.
 */
async function inProcess(): Promise<void> {
  const tasks = ms(1_000_000, 100_000);
  const loops = 64;
  const task = async () => {};
  // Tasks per second of the process's CPU time, not of the wall clock: these loops never wait on
  // anything outside the process, and on a shared machine the wall clock also counts the time other
  // work held the cores (p-limit's own figure moved 3x between runs of the same build; per CPU
  // second, within 10%).
  const timeLoop = async (once: () => Promise<unknown>, count = tasks, workers = loops) => {
    let left = count;
    const started = process.cpuUsage();
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (left-- > 0) await once();
      }),
    );
    const used = process.cpuUsage(started);
    return count / ((used.user + used.system) / 1e6);
  };
  const slots = semaphore({ client: memoryStore(), limit: loops });
  const queued = semaphore({ client: memoryStore(), limit: 16, waitMs: 60_000 });
  const limit = pLimit(loops);
  const limit16 = pLimit(16);
  const sema = new Sema(loops);
  const subjects: [string, () => Promise<unknown>][] = [
    [
      "leasehold memory (acquire+release)",
      async () => {
        const lease = await slots.acquire("k");
        await task();
        await lease?.release();
      },
    ],
    ["leasehold memory (run)", () => slots.run("k", task)],
    ["p-limit", () => limit(task)],
    [
      "async-sema",
      async () => {
        await sema.acquire();
        await task();
        sema.release();
      },
    ],
    ["leasehold memory, limit 16, queueing (run, waitMs)", () => queued.run("k", task)],
    ["p-limit, limit 16", () => limit16(task)],
  ];
  const results: Record<string, number> = {};
  for (const [name, once] of subjects) results[name] = await timeLoop(once);
  // Limit 16 at concurrency 1 and 8: the queueing call's options, but a permit is always free.
  for (const workers of [1, 8]) {
    results[`leasehold memory, limit 16, ${workers} workers (run, waitMs)`] = await timeLoop(
      () => queued.run("k", task),
      tasks,
      workers,
    );
    results[`p-limit, limit 16, ${workers} workers`] = await timeLoop(() => limit16(task), tasks, workers);
  }
  // Diagnostics channels cost nothing without a subscriber; with one, this is what they cost.
  const noop = () => {};
  subscribe(CHANNELS.acquired, noop);
  subscribe(CHANNELS.released, noop);
  results["leasehold memory (acquire+release), with a subscriber"] = await timeLoop(subjects[0]?.[1] as () => Promise<unknown>);
  unsubscribe(CHANNELS.acquired, noop);
  unsubscribe(CHANNELS.released, noop);
  results["leasehold memory (acquire+release), again without"] = await timeLoop(subjects[0]?.[1] as () => Promise<unknown>);
  const ours = results["leasehold memory (acquire+release)"] as number;
  const pl = (name: string) => {
    const workers = / (\d+) workers/.exec(name)?.[1];
    if (workers !== undefined) return results[`p-limit, limit 16, ${workers} workers`] as number;
    return name.includes("limit 16") ? (results["p-limit, limit 16"] as number) : (results["p-limit"] as number);
  };
  scenarios.push({
    name: "in-process",
    unit: "tasks per CPU-second",
    rows: Object.entries(results).map(([subject, perSec]) => ({
      subject,
      "tasks/CPU-s": Math.round(perSec),
      "vs p-limit": round(perSec / pl(subject), 3),
    })),
    bars: Object.entries(results).map(([label, value]) => ({ label, value })),
    targets: [
      target("fail fast, acquire+release: tasks/s vs p-limit", ours / (results["p-limit"] as number), 1),
      target(
        "64 workers through limit 16, queueing: tasks/s vs p-limit",
        (results["leasehold memory, limit 16, queueing (run, waitMs)"] as number) / (results["p-limit, limit 16"] as number),
        1,
      ),
      ...[1, 8].map((workers) =>
        target(
          `${workers} workers through limit 16 (run, waitMs): tasks/s vs p-limit`,
          (results[`leasehold memory, limit 16, ${workers} workers (run, waitMs)`] as number) /
            (results[`p-limit, limit 16, ${workers} workers`] as number),
          1,
        ),
      ),
      target(
        "no subscriber vs a subscriber (no-subscriber cost is nil)",
        (results["leasehold memory (acquire+release), again without"] as number) /
          (results["leasehold memory (acquire+release), with a subscriber"] as number),
        0.95,
      ),
    ],
  });
}

/** 6. Scale: latency with many holders in one key, Redis memory for 100,000 tenants, renewal traffic for 10,000 leases. */
async function scale(): Promise<void> {
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  const p50s: number[] = [];
  for (const holders of [10, 1_000, 10_000]) {
    const slots = semaphore({ client: redis, limit: holders + 100, prefix: `bench-scale-${holders}` });
    for (let start = 0; start < holders; start += 1000) {
      await Promise.all(Array.from({ length: Math.min(1000, holders - start) }, () => slots.acquire("k", { leaseMs: 120_000 })));
    }
    const sample = await cycles(
      async () => {
        const lease = await slots.acquire("k");
        await lease?.release();
      },
      1,
      ms(1500, 300),
    );
    p50s.push(sample.p50);
    rows.push({
      measure: `acquire+release with ${holders.toLocaleString("en")} holders`,
      "p50 ms": round(sample.p50, 3),
      "p99 ms": round(sample.p99, 3),
    });
    bars.push({ label: `${holders} holders, p50 ms`, value: sample.p50 });
  }
  await admin.flushall();
  const memoryBefore = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))?.[1]);
  const tenants = ms(100_000, 20_000);
  const perTenant = semaphore({ client: redis, limit: 5, prefix: "bench-tenant" });
  for (let start = 0; start < tenants; start += 2000) {
    await Promise.all(Array.from({ length: 2000 }, (_, n) => perTenant.acquire(`t${start + n}`, { leaseMs: 10_000 })));
  }
  const memoryDuring = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))?.[1]);
  const keysDuring = await admin.dbsize();
  rows.push({
    measure: `Redis memory, ${tenants.toLocaleString("en")} active tenants`,
    bytes: memoryDuring - memoryBefore,
    "bytes/tenant": Math.round((memoryDuring - memoryBefore) / tenants),
    keys: keysDuring,
  });
  await admin.flushall();

  const leases = ms(10_000, 2_000);
  const heartbeatMs = 500;
  const renewing = semaphore({ client: redis, limit: leases, prefix: "bench-renew" });
  const windowMs = ms(3000, 1200);
  // Only the renewals are counted: every lease is held first, then the window is measured, then they go.
  let holding = 0;
  let letGo!: () => void;
  const done = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  // A machine too busy to renew within a lease loses some: counted, rather than ending the run.
  let lost = 0;
  const runs = Array.from({ length: leases }, () =>
    renewing
      .run(
        "k",
        () => {
          holding++;
          return done;
        },
        { leaseMs: 2000, heartbeatMs },
      )
      .catch((error: unknown) => {
        if (!(error instanceof SemaphoreLeaseLostError)) throw error;
        lost++;
      }),
  );
  while (holding < leases) await new Promise((resolve) => setTimeout(resolve, 10));
  const before = await commands();
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const calls = sent(before, await commands());
  letGo();
  await Promise.all(runs);
  const perLeasePerHeartbeat = calls / leases / (windowMs / heartbeatMs);
  rows.push({
    measure: `renewal traffic, ${leases.toLocaleString("en")} leases held by one process (heartbeat ${heartbeatMs} ms)`,
    "commands/s": Math.round(calls / (windowMs / 1000)),
    "per lease per heartbeat": round(perLeasePerHeartbeat, 4),
    "leases lost": lost,
  });
  const flat = Math.max(...p50s) / Math.max(Math.min(...p50s), 1e-9);
  scenarios.push({
    name: "scale",
    unit: "ms",
    rows,
    bars,
    targets: [
      target("p50 with 10,000 holders vs 10 (flat: at most 2x)", flat, 2, true),
      target("renewal commands per lease per heartbeat, 10,000 leases on one id", perLeasePerHeartbeat, 0.01, true),
    ],
  });
}

/**
 * 7. Tenants sharing one id (issue #14): acquire latency with 10 vs 10,000 tenants, Redis memory per
 * tenant while it holds and once it is idle, and a light tenant's wait under a heavy tenant's flood,
 * fair queue vs plain FIFO (the same id without tenants).
 */
async function tenants(): Promise<void> {
  const rows: Record<string, number | string>[] = [];
  const bars: Scenario["bars"] = [];
  const targets: Target[] = [];

  // (a) Latency with many tenants on one id: each holds a permit (its cap is 1); then each also has a
  // waiter queued at its cap, so that every grant has those tenants to pass over. A new tenant's acquire
  // (admitted: the id has room) is timed, its release is not; and, while they only hold, the fail-fast
  // acquire of a tenant at its cap (refused).
  const counts = quick ? [10, 1_000] : [10, 10_000];
  const acquireP50 = async (slots: ReturnType<typeof semaphore>, tenant: () => string) => {
    const latencies: number[] = [];
    const until = performance.now() + ms(1500, 300);
    while (performance.now() < until) {
      const t0 = performance.now();
      const lease = await slots.acquire("k", { tenant: tenant() });
      latencies.push(performance.now() - t0);
      await lease?.release();
    }
    return summarize(latencies, 1).p50;
  };
  const p50: Record<string, number[]> = {};
  for (const [name, store] of [
    ["redis", redisStore(redis)],
    ["memory", memoryStore()],
  ] as [string, Store][]) {
    for (const n of counts) {
      const prefix = `bench-tenants-${name}-${n}`;
      const limit = 2 * n + 100;
      const slots = semaphore({ client: store, limit, tenantLimit: 1, prefix });
      for (let start = 0; start < n; start += 1000) {
        await Promise.all(
          Array.from({ length: Math.min(1000, n - start) }, (_, i) =>
            slots.acquire("k", { tenant: `t${start + i}`, leaseMs: 600_000 }),
          ),
        );
      }
      let m = 0;
      const holding = await acquireP50(slots, () => `new${m++}`);
      // A tenant at its cap failing fast: refused, with the time until one of its own leases ends.
      const refused = await acquireP50(slots, () => `t${m++ % n}`);
      // Waiters joined through the store, with a long waiter lease: nobody has to keep them alive.
      for (let start = 0; start < n; start += 1000) {
        await Promise.all(
          Array.from({ length: Math.min(1000, n - start) }, (_, i) =>
            store.semaphore.acquire({
              storeKey: storeKey(prefix, "semaphore", "k"),
              token: `w${start + i}@t${start + i}`,
              limit,
              weight: 1,
              leaseMs: 600_000,
              queue: { waiterLeaseMs: 600_000, maxQueue: 0 },
              tenant: { limit: 1, maxQueue: 0 },
            }),
          ),
        );
      }
      const capped = await acquireP50(slots, () => `new${m++}`);
      for (const [shape, value] of [
        ["each holding", holding],
        ["each holding, one refused at its cap", refused],
        ["each holding and waiting at its cap", capped],
      ] as const) {
        const label = `${name}, ${n.toLocaleString("en")} tenants ${shape}`;
        p50[`${name} ${shape}`] = [...(p50[`${name} ${shape}`] ?? []), value];
        rows.push({ measure: `acquire p50, ${label}`, "p50 ms": round(value, 3) });
        bars.push({ label: `${label} (p50 ms)`, value });
      }
    }
  }
  for (const [shape, [few, many]] of Object.entries(p50)) {
    targets.push(
      target(
        `acquire p50, ${shape}: ${counts[1]?.toLocaleString("en")} tenants vs 10 (flat: at most 2x)`,
        (many as number) / Math.max(few as number, 1e-9),
        2,
        true,
      ),
    );
  }

  // (b) Redis memory per tenant on one id: while each holds a permit, once all have released, and once
  // all leases have lapsed without a release; beside an id per tenant (the other way to give tenants
  // their own limits).
  await admin.flushall();
  const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info("memory"))?.[1]);
  const n = ms(20_000, 2_000);
  const inBatches = async <T>(make: (i: number) => Promise<T>): Promise<T[]> => {
    const all: T[] = [];
    for (let start = 0; start < n; start += 2000) {
      all.push(...(await Promise.all(Array.from({ length: Math.min(2000, n - start) }, (_, i) => make(start + i)))));
    }
    return all;
  };
  const keysGone = async () => {
    const started = performance.now();
    while ((await admin.dbsize()) > 0 && performance.now() - started < 10_000) await new Promise((r) => setTimeout(r, 20));
    return admin.dbsize();
  };
  // Each is run twice and the second measured: loading the scripts and growing the Lua heap add to
  // used_memory once, and would be counted against the tenants.
  const memoryRows = async (
    subject: string,
    hold: (i: number, leaseMs: number) => Promise<{ release(): Promise<boolean> } | null>,
    warmUp = true,
  ): Promise<{ keysAfterRelease: number; keysAfterLapse: number }> => {
    if (warmUp) await memoryRows(subject, hold, false);
    const base = await usedMemory();
    const leases = await inBatches((i) => hold(i, 60_000));
    const active = (await usedMemory()) - base;
    const keys = (await admin.keys("*")) as string[];
    const usage = (await Promise.all(keys.slice(0, 5).map((key) => admin.memory("USAGE", key, "SAMPLES", 0)))) as number[];
    await Promise.all(leases.map((lease) => lease?.release()));
    const keysAfterRelease = await keysGone();
    const released = (await usedMemory()) - base;
    await inBatches((i) => hold(i, 300));
    const keysAfterLapse = await keysGone();
    const lapsed = (await usedMemory()) - base;
    if (!warmUp) return { keysAfterRelease, keysAfterLapse };
    rows.push({
      measure: `Redis memory, ${n.toLocaleString("en")} tenants each holding, ${subject}`,
      "bytes/tenant": Math.round(active / n),
      keys: keys.length,
      ...(keys.length <= 5 ? { "MEMORY USAGE bytes/tenant": Math.round(usage.reduce((a, b) => a + b, 0) / n) } : {}),
    });
    rows.push({
      measure: `the same, idle: all released / all lapsed unreleased, ${subject}`,
      "bytes/tenant": `${Math.round(released / n)} / ${Math.round(lapsed / n)}`,
      keys: `${keysAfterRelease} / ${keysAfterLapse}`,
    });
    bars.push({ label: `bytes per holding tenant, ${subject}`, value: active / n });
    return { keysAfterRelease, keysAfterLapse };
  };
  const shared = semaphore({ client: redis, limit: n, tenantLimit: 1, prefix: "bench-tenant-shared" });
  const one = await memoryRows("one id", (i, leaseMs) => shared.acquire("k", { tenant: `tenant-${i}`, leaseMs }));
  const perTenant = semaphore({ client: redis, limit: 1, prefix: "bench-tenant-keys" });
  await memoryRows("an id per tenant", (i, leaseMs) => perTenant.acquire(`tenant-${i}`, { leaseMs }));
  targets.push(
    target("keys left once every tenant is idle (released, then lapsed)", one.keysAfterRelease + one.keysAfterLapse, 0, true),
  );

  // (c) A light tenant's wait under a heavy tenant's flood: 32 heavy callers loop through limit 4 with a
  // 10 to 30 ms body while one light caller (20 ms) comes back every 40 ms. Idle: the light caller alone. Besides the
  // wait in ms, the hand-offs it waited through: heavy grants made after the light call was made (by
  // their fences, against the server's clock read just before it) and before its own (a count, which
  // this machine's noise does not stretch; it includes grants made while the light call was still on
  // its way, behind the heavy callers' commands on the one connection).
  const limit = 4;
  const bodyMs = 20;
  const duration = ms(3000, 800);
  const body = () => new Promise((resolve) => setTimeout(resolve, bodyMs));
  const lightRedis = new Redis(server.url);
  const floodRun = async (prefix: string, heavy: object | undefined, light: object) => {
    const slots = semaphore({ client: redis, limit, prefix, waitMs: 30_000 });
    const lightSlots = semaphore({ client: lightRedis, limit, prefix, waitMs: 30_000 });
    const until = performance.now() + duration;
    const heavyFences: number[] = [];
    const heavyBody = (lease: { fence: number }) => {
      heavyFences.push(lease.fence);
      // 10 to 30 ms, so that the heavy holders do not end in lockstep.
      return new Promise((resolve) => setTimeout(resolve, bodyMs / 2 + Math.random() * bodyMs));
    };
    const waits: number[] = [];
    const handOffs: number[] = [];
    const heavyLoops = Array.from({ length: heavy === undefined ? 0 : 32 }, async () => {
      while (performance.now() < until) await slots.run("k", heavyBody, heavy);
    });
    await new Promise((resolve) => setTimeout(resolve, heavy === undefined ? 0 : 50)); // the queue fills
    while (performance.now() < until) {
      const [seconds, micros] = await admin.time();
      const sentUs = Number(seconds) * 1e6 + Number(micros);
      const t0 = performance.now();
      await lightSlots.run(
        "k",
        async (lease) => {
          waits.push(performance.now() - t0);
          handOffs.push(heavyFences.filter((fence) => fence > sentUs && fence < lease.fence).length);
          await body();
        },
        light,
      );
      await new Promise((resolve) => setTimeout(resolve, 2 * bodyMs));
    }
    await Promise.all(heavyLoops);
    return { wait: summarize(waits, duration / 1000), handOffs: summarize(handOffs, duration / 1000) };
  };
  const idle = await floodRun("bench-flood-idle", undefined, { tenant: "light", tenantLimit: limit });
  const fair = await floodRun(
    "bench-flood-fair",
    { tenant: "heavy", tenantLimit: limit },
    { tenant: "light", tenantLimit: limit },
  );
  const fifo = await floodRun("bench-flood-fifo", {}, {});
  const capped = await floodRun(
    "bench-flood-capped",
    { tenant: "heavy", tenantLimit: limit - 1 },
    { tenant: "light", tenantLimit: limit },
  );
  lightRedis.disconnect();
  for (const [subject, run] of [
    ["idle (light tenant alone)", idle],
    ["fair queue (heavy cap = limit)", fair],
    ["plain FIFO (no tenants)", fifo],
    ["fair queue, heavy cap = limit - 1", capped],
  ] as const) {
    rows.push({
      measure: `light tenant's wait under a heavy flood: ${subject}`,
      "p50 ms": round(run.wait.p50, 3),
      "p99 ms": round(run.wait.p99, 3),
      "hand-offs p50 / p99": `${run.handOffs.p50} / ${run.handOffs.p99}`,
    });
    bars.push({ label: `light wait p99 ms, ${subject}`, value: run.wait.p99 });
  }
  targets.push(
    target(
      "light tenant's wait p99 under a flood, in hand-offs beyond idle's (a few: at most 3)",
      fair.handOffs.p99 - idle.handOffs.p99,
      3,
      true,
    ),
    target(
      "light tenant's wait p99 under a flood, fair queue vs plain FIFO",
      fair.wait.p99 / Math.max(fifo.wait.p99, 1e-9),
      0.2,
      true,
    ),
  );
  scenarios.push({ name: "tenants", unit: "ms", rows, bars, targets });
}

const started = performance.now();
for (const step of [redisCycles, clientCycles, contended, commandsPerRequest, httpOverhead, inProcess, scale, tenants]) {
  if (only !== undefined && !only.includes(step.name)) continue;
  process.stdout.write(`running ${step.name}...`);
  const stepStarted = performance.now();
  await step();
  process.stdout.write(` ${Math.round((performance.now() - stepStarted) / 1000)} s\n`);
}
redis.disconnect();
admin.disconnect();
await server.stop();

const machine = {
  cpus: `${cpus().length} x ${cpus()[0]?.model ?? "unknown"}`,
  memory: `${Math.round(totalmem() / 2 ** 30)} GiB`,
  node: process.version,
  redis: "redis-server from PATH, private instance",
  mode: quick ? "quick" : "full",
};
for (const scenario of scenarios) {
  console.log(`\n## ${scenario.name}`);
  console.table(scenario.rows);
  for (const t of scenario.targets) console.log(`  ${t.pass ? "meets" : "MISSES"}  ${t.target}: ${t.value} (target ${t.goal})`);
  if (only !== undefined) continue;
  writeFileSync(
    new URL(`./results/${scenario.name}.svg`, import.meta.url),
    barChart(`${scenario.name} (${machine.mode})`, scenario.unit, scenario.bars),
  );
}
if (only === undefined) {
  writeFileSync(
    new URL("./results.json", import.meta.url),
    `${JSON.stringify({ machine, date: new Date().toISOString(), scenarios }, null, 2)}\n`,
  );
}
console.log(
  `\nbench finished in ${Math.round((performance.now() - started) / 1000)} s; results in bench/results.json and bench/results/*.svg`,
);
