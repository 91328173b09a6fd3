// A Redis acquire + release cycle, per subject: the wall-clock time per cycle and the CPU time each
// side spent on it (this process, and the redis-server), subjects in interleaved rounds, medians.
// Where wall < node + redis, the two sides worked at once; where wall ≈ node + redis, they took turns.
//
//   npm run build
//   redis-server --port 6392 --save '' --appendonly no --daemonize yes
//   chrt -f -p 10 $(pgrep -f 'redis-server.*6392')     # see below
//   chrt -f 10 env C=64 N=40000 node bench/prototypes/cycle-cpu.mjs
//   redis-cli -p 6392 shutdown nosave
//
// On this shared 2-core machine other work takes the cores at random; running both processes under
// SCHED_FIFO (root) keeps them ahead of it, which brought redis-semaphore's figure at concurrency 64
// back to within 10-40% of a quiet run's, where plain runs (or `nice`) differed 2x.
// C: callers looping at once. N: cycles per round. R: rounds (3). ONLY: subjects, comma-separated
// (ioredis: the two fast scripts by EVALSHA; store: redisStore's calls; engine: semaphore().acquire
// and lease.release(); rs: redis-semaphore). DIST: the build to measure (default ../../dist).
import { execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { Semaphore as RedisSemaphore } from "redis-semaphore";

const C = Number(process.env.C ?? 1);
const N = Number(process.env.N ?? 10_000);
const R = Number(process.env.R ?? 3);
const port = Number(process.env.PORT ?? 6392);
const dist = process.env.DIST ?? new URL("../../dist", import.meta.url).pathname;
const lib = await import(`${dist}/esm/src/index.js`);
const { scripts } = await import(`${dist}/esm/src/store/redis/lua.generated.js`);

const serverPid = execSync(`pgrep -f 'redis-server.*${port}'`).toString().trim().split("\n")[0];
/** The redis-server's CPU time so far, in µs (utime + stime from /proc, in clock ticks of 10 ms). */
const serverMicros = () => {
  const fields = readFileSync(`/proc/${serverPid}/stat`, "utf8").split(" ");
  return (Number(fields[13]) + Number(fields[14])) * 10_000;
};

const redis = new Redis({ port });
await redis.script("LOAD", scripts.semaphoreTake.source);
await redis.script("LOAD", scripts.semaphoreReturn.source);
let n = 0;
const token = () => `cc${(n++).toString(36).padStart(8, "0")}.AAAAAAAAAAAAAAAAAAAAAAAA`;
const storeKey = `{cycle-cpu-${process.pid}:k}`;
const store = lib.redisStore(redis);
const slots = lib.semaphore(store, { limit: 1e6, prefix: `cycle-cpu-${process.pid}` });
const release = { storeKey, weight: 1, heldMs: undefined };
const subjects = {
  ioredis: async () => {
    const t = token();
    await redis.evalsha(scripts.semaphoreTake.sha, 1, storeKey, t, 1e6, 60_000);
    await redis.evalsha(scripts.semaphoreReturn.sha, 1, storeKey, t);
  },
  store: async () => {
    const t = token();
    await store.semaphore.acquire({ storeKey, token: t, limit: 1e6, weight: 1, leaseMs: 60_000 });
    await store.semaphore.release({ ...release, token: t });
  },
  engine: async () => {
    const lease = await slots.acquire("k");
    await lease.release();
  },
  rs: async () => {
    const held = new RedisSemaphore(redis, `cycle-cpu-rs-${process.pid}`, 1e6, { refreshInterval: 0, acquireAttemptsLimit: 1 });
    await held.acquire();
    await held.release();
  },
};
const only = (process.env.ONLY ?? "engine,rs").split(",");

async function run(op, count) {
  let left = count;
  const server = serverMicros();
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (left-- > 0) await op();
    }),
  );
  const wall = (performance.now() - started) * 1000;
  const used = process.cpuUsage(cpu);
  return { node: (used.user + used.system) / count, redis: (serverMicros() - server) / count, wall: wall / count };
}

for (const name of only) await run(subjects[name], 2000);
const results = Object.fromEntries(only.map((name) => [name, []]));
for (let r = 0; r < R; r++) for (const name of only) results[name].push(await run(subjects[name], N));
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const per = (name, field) => median(results[name].map((x) => x[field]));
for (const name of only) {
  const [node, server, wall] = [per(name, "node"), per(name, "redis"), per(name, "wall")];
  const ratio = only.includes("rs") ? ` (${(per("rs", "wall") / wall).toFixed(2)}x redis-semaphore's rate)` : "";
  console.log(
    `${name.padEnd(8)} C=${C}: wall ${wall.toFixed(1)} µs, node ${node.toFixed(1)} µs, redis ${server.toFixed(1)} µs per cycle${ratio}`,
  );
}
await slots.close();
await store.close();
redis.disconnect();
