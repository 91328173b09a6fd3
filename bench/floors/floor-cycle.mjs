// Redis acquire + release cycles/s against redis-semaphore, side by side in one process: short
// rounds, subjects interleaved, the median of the per-round ratios (bench/HISTORY.md, "Redis cycle,
// fifth round"). On this shared 2-core machine a round's rate swings with other work; a ratio taken
// within one round, subjects a few ms apart, swings less.
//
//   npm run build
//   redis-server --port 6404 --save '' --appendonly no --daemonize yes
//   C=1 R=30 N=500 PORT=6404 node bench/floors/floor-cycle.mjs
//   redis-cli -p 6404 shutdown nosave
//
// Subjects: rs (redis-semaphore), floor (./floor-scripts.mjs by EVALSHA from ioredis: the cheapest pair
// with the fast cycle's guarantees), scripts (leasehold's two fast scripts by EVALSHA, nothing around
// them), engine (`semaphore().acquire` and `lease.release()` of the build in DIST, default ../../dist),
// and engine2 (the same of the build in DIST2, when given: main's against a branch's).
// C: callers looping at once. N: cycles per subject per round. R: rounds. ONLY: subjects.
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { Semaphore as RedisSemaphore } from "redis-semaphore";
import { floorScripts } from "./floor-scripts.mjs";

const C = Number(process.env.C ?? 1);
const N = Number(process.env.N ?? 500);
const R = Number(process.env.R ?? 30);
const port = Number(process.env.PORT ?? 6404);
const dist = process.env.DIST ?? new URL("../../dist", import.meta.url).pathname;
const lib = await import(`${dist}/esm/src/index.js`);
const { scripts } = await import(`${dist}/esm/src/store/redis/lua.generated.js`);
const lib2 = process.env.DIST2 ? await import(`${process.env.DIST2}/esm/src/index.js`) : undefined;

const redis = new Redis({ port });
// The server's own pid (a pgrep of its command line can find the pgrep's shell instead).
const serverPid = /process_id:(\d+)/.exec(await redis.info("server"))?.[1];
/** The redis-server's CPU time so far, in µs (utime + stime, clock ticks of 10 ms: read over many rounds). */
const serverMicros = () => {
  const fields = readFileSync(`/proc/${serverPid}/stat`, "utf8").split(" ");
  return (Number(fields[13]) + Number(fields[14])) * 10_000;
};
for (const s of [scripts.semaphoreAcquireFast, scripts.semaphoreReleaseFast, floorScripts.take, floorScripts.back]) {
  await redis.script("LOAD", s.source);
}
let n = 0;
const token = () => `cc${(n++).toString(36).padStart(8, "0")}.AAAAAAAAAAAAAAAAAAAAAAAA`;
const key = `{floor-cycle-${process.pid}:k}`;
const slots = lib.semaphore(redis, { limit: 1e6, prefix: `floor-cycle-${process.pid}` });
const slots2 = lib2?.semaphore(redis, { limit: 1e6, prefix: `floor-cycle2-${process.pid}` });
const subjects = {
  rs: async () => {
    const held = new RedisSemaphore(redis, `floor-cycle-rs-${process.pid}`, 1e6, { refreshInterval: 0, acquireAttemptsLimit: 1 });
    await held.acquire();
    await held.release();
  },
  floor: async () => {
    const t = token();
    if ((await redis.evalsha(floorScripts.take.sha, 1, key, t, 1e6, 60_000)) < 0) throw new Error("refused");
    await redis.evalsha(floorScripts.back.sha, 1, key, t);
  },
  scripts: async () => {
    const t = token();
    await redis.evalsha(scripts.semaphoreAcquireFast.sha, 1, key, t, 1e6, 60_000);
    await redis.evalsha(scripts.semaphoreReleaseFast.sha, 1, key, t);
  },
  engine: async () => {
    const lease = await slots.acquire("k");
    await lease.release();
  },
  engine2: async () => {
    const lease = await slots2.acquire("k");
    await lease.release();
  },
};
const only = (process.env.ONLY ?? (lib2 ? "rs,floor,scripts,engine,engine2" : "rs,floor,scripts,engine")).split(",");

/** CPU µs spent per subject (this process, the server) and cycles run, over every round. */
const cpu = {};
/** Cycles per second of `count` cycles from C loops. */
async function rate(op, count, name) {
  let left = count;
  const server = serverMicros();
  const mine = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (left-- > 0) await op();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(mine);
  if (name !== undefined) {
    cpu[name] ??= { node: 0, server: 0, cycles: 0 };
    const sums = cpu[name];
    sums.node += used.user + used.system;
    sums.server += serverMicros() - server;
    sums.cycles += count;
  }
  return count / seconds;
}

for (const name of only) await rate(subjects[name], N);
const ratios = Object.fromEntries(only.map((name) => [name, []]));
const rates = Object.fromEntries(only.map((name) => [name, []]));
for (let r = 0; r < R; r++) {
  // The order rotates per round, so no subject always follows another.
  const order = only.map((_, i) => only[(i + r) % only.length]);
  const round = {};
  for (const name of order) round[name] = await rate(subjects[name], N, name);
  for (const name of only) {
    rates[name].push(round[name]);
    ratios[name].push(round[name] / round.rs);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const quartiles = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[Math.floor(s.length / 4)].toFixed(2)}–${s[Math.floor((3 * s.length) / 4)].toFixed(2)}`;
};
for (const name of only) {
  const { node, server, cycles } = cpu[name];
  console.log(
    `${name.padEnd(8)} C=${C}: ${median(rates[name]).toFixed(0).padStart(6)} cycles/s, ${median(ratios[name]).toFixed(3)} of redis-semaphore's (quartiles ${quartiles(ratios[name])}); CPU per cycle: node ${(node / cycles).toFixed(1)} µs, redis ${(server / cycles).toFixed(1)} µs`,
  );
}
await slots.close();
await slots2?.close();
redis.disconnect();
