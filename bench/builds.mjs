// Two builds of leasehold side by side in one run, in interleaved rounds, reported as ratios
// (after / before): a change to the engine is judged against the build before it on the same
// machine in the same minutes, never against a figure from another day.
//
//   npm run build && cp -r dist /some/where/before-dist      # the build to compare against
//   node bench/builds.mjs BEFORE_DIST [AFTER_DIST=dist] [--rounds=5]
//
// Scenarios: the memory store's fail-fast acquire + release (64 loops, limit 64: nobody waits) and
// queueing acquire (64 loops, limit 16, waitMs), in tasks per CPU-second; the Redis acquire +
// release cycle at concurrency 1 and 8, in cycles/s; and a Hono route with limit 10, a 20 ms
// handler and 50 connections, on the memory store and on Redis, in requests (nearly all refused)
// per second of the server process's CPU and of wall clock.
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import { freePort, startRedisServer } from "../test/support/redis-server.js";

const args = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
const rounds = Number(process.argv.find((arg) => arg.startsWith("--rounds="))?.slice(9) ?? 5);
const only = process.argv
  .find((arg) => arg.startsWith("--only="))
  ?.slice(7)
  .split(",");
const dists = { before: resolve(args[0] ?? ".proto/before/dist"), after: resolve(args[1] ?? "dist") };
const builds = {};
for (const [name, dist] of Object.entries(dists)) builds[name] = await import(`${dist}/esm/src/index.js`);

const server = await startRedisServer();
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Tasks per CPU-second of `concurrency` loops running `op` for `ms`. */
async function perCpuSecond(op, concurrency, ms) {
  let count = 0;
  const cpu = process.cpuUsage();
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await op();
        count++;
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return count / ((used.user + used.system) / 1e6);
}

/** Per second of wall clock. */
async function perSecond(op, concurrency, ms) {
  let count = 0;
  const started = performance.now();
  const until = started + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        await op();
        count++;
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

const scenarios = {
  "memory fail-fast acquire+release, tasks/CPU-s": (lh) => {
    const sem = lh.semaphore({ client: lh.memoryStore(), limit: 64 });
    return () => perCpuSecond(async () => (await sem.acquire("bench")).release(), 64, 400);
  },
  "memory queued acquire+release (limit 16, 64 loops), tasks/CPU-s": (lh) => {
    const sem = lh.semaphore({ client: lh.memoryStore(), limit: 16 });
    return () => perCpuSecond(async () => (await sem.acquire("bench", { waitMs: 10_000 })).release(), 64, 400);
  },
  "memory queued through the waiting room (a wrapper that forwards no in-process waiter), tasks/CPU-s": (lh) => {
    const store = lh.memoryStore();
    const remote = (call) => {
      if (call.queue?.waiter === undefined) return call;
      const { waiter: _, ...queue } = call.queue;
      return { ...call, queue };
    };
    const wrapper = {
      kind: "wrapped",
      semaphore: { ...store.semaphore, acquire: (call) => store.semaphore.acquire(remote(call)) },
      lock: store.lock,
      watch: (call) => store.watch(call),
    };
    const sem = lh.semaphore({ client: wrapper, limit: 16 });
    return () => perCpuSecond(async () => (await sem.acquire("bench", { waitMs: 10_000 })).release(), 64, 400);
  },
  "memory fail-fast refusal (limit 1 held), tasks/CPU-s": (lh) => {
    const sem = lh.semaphore({ client: lh.memoryStore(), limit: 1 });
    void sem.acquire("bench", { leaseMs: 600_000 });
    return () => perCpuSecond(() => sem.acquire("bench").catch(() => {}), 64, 400);
  },
  "redis cycle, concurrency 1, cycles/s": (lh) => {
    const sem = lh.semaphore({ client: new Redis(server.url), limit: 64 });
    const id = `c1-${Math.random()}`;
    return () => perSecond(async () => (await sem.acquire(id)).release(), 1, 400);
  },
  "redis cycle, concurrency 8, cycles/s": (lh) => {
    const sem = lh.semaphore({ client: new Redis(server.url), limit: 64 });
    const id = `c8-${Math.random()}`;
    return () => perSecond(async () => (await sem.acquire(id)).release(), 8, 400);
  },
};

const results = {};
const wanted = Object.entries(scenarios).filter(([name]) => only === undefined || only.some((o) => name.includes(o)));
const runners = Object.fromEntries(
  wanted.map(([name, make]) => [name, Object.fromEntries(Object.entries(builds).map(([b, lh]) => [b, make(lh)]))]),
);
for (const [name] of wanted) results[name] = { before: [], after: [] };
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? ["before", "after"] : ["after", "before"];
  for (const [name] of wanted) for (const b of order) results[name][b].push(await runners[name][b]());
}

// HTTP: one server process per build, each serving the route on memory and on Redis; rounds interleave.
if (only === undefined || only.some((o) => "hono".includes(o))) {
  const children = {};
  const urls = {};
  for (const [b, dist] of Object.entries(dists)) {
    const ports = [await freePort(), await freePort()];
    const child = spawn(process.execPath, ["bench/builds-server.mjs"], {
      env: { ...process.env, DIST: dist, PORTS: ports.join(","), REDIS_URL: server.url },
      stdio: ["ignore", "pipe", "inherit"],
    });
    await new Promise((ok) => child.stdout.on("data", (data) => String(data).includes("listening") && ok()));
    children[b] = child;
    urls[b] = { memory: `http://127.0.0.1:${ports[0]}/`, redis: `http://127.0.0.1:${ports[1]}/` };
  }
  const cpuOf = async (pid) => {
    const { readFile } = await import("node:fs/promises");
    const stat = (await readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1].split(" ");
    return (Number(stat[11]) + Number(stat[12])) / 100;
  };
  for (const store of ["memory", "redis"]) {
    for (const b of ["before", "after"]) await autocannon({ url: urls[b][store], connections: 50, duration: 0.5 });
    results[`hono refusals ${store} (limit 10, 20 ms, 50 conn), req/s`] = { before: [], after: [] };
    results[`hono refusals ${store}, req per server CPU-s`] = { before: [], after: [] };
  }
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ["before", "after"] : ["after", "before"];
    for (const store of ["memory", "redis"]) {
      for (const b of order) {
        const cpu = await cpuOf(children[b].pid);
        const r = await autocannon({ url: urls[b][store], connections: 50, duration: 1.5 });
        const used = (await cpuOf(children[b].pid)) - cpu;
        results[`hono refusals ${store} (limit 10, 20 ms, 50 conn), req/s`][b].push(r.requests.average);
        results[`hono refusals ${store}, req per server CPU-s`][b].push(r.requests.total / used);
      }
    }
  }
  for (const child of Object.values(children)) child.kill();
}

const rows = Object.entries(results).map(([name, { before, after }]) => ({
  scenario: name,
  before: Math.round(median(before)),
  after: Math.round(median(after)),
  "after/before": Math.round((median(after) / median(before)) * 1000) / 1000,
}));
console.table(rows);
await server.stop?.();
process.exit(0);
