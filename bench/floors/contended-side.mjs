// The contended benchmark's queue (limit 16, 64 callers, 5 ms bodies, `waitMs`) for several builds
// side by side in one process, in interleaved rounds, against one redis-server (bench/HISTORY.md,
// "Contended hand-off, fourth round"). Wall clock, so read the ratios of many rounds, not one.
//   node bench/floors/contended-side.mjs --port=6391 --rounds=6 --ms=3000 \
//     old=/tmp/mainbuild/dist/esm/src/index.js new=dist/esm/src/index.js
// A subject `name=path:VAR=value` sets an environment variable while its semaphore is made (a build
// that reads one there).
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Redis } from "ioredis";

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const port = Number(arg("port", "6391"));
const rounds = Number(arg("rounds", "6"));
const ms = Number(arg("ms", "3000"));
const limit = 16;
const bodyMs = 5;
const callers = 64;
const specs = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const subjects = [];
for (const spec of specs) {
  const [name, rest] = spec.split(/=(.*)/s);
  const [path, setting] = rest.split(":");
  const lib = await import(pathToFileURL(resolve(path)).href);
  const [variable, value] = setting?.split("=") ?? [];
  const before = variable === undefined ? undefined : process.env[variable];
  if (variable !== undefined) process.env[variable] = value;
  // A client each: a client's store is shared by the semaphores made over it.
  const redis = new Redis({ port });
  const slots = lib.semaphore({ client: redis, limit, prefix: `side-${name}-${Date.now()}` });
  if (variable !== undefined) {
    if (before === undefined) delete process.env[variable];
    else process.env[variable] = before;
  }
  subjects.push({ name, slots, redis, ratios: [], p99: [], releaseMs: [], clientUs: [], serverUs: [] });
}
const body = () => new Promise((done) => setTimeout(done, bodyMs));

/** The server's CPU seconds so far (INFO cpu). */
async function serverCpu(redis) {
  const info = await redis.info("cpu");
  const figure = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(info)?.[1]);
  return figure("used_cpu_user") + figure("used_cpu_sys");
}

async function run(subject) {
  const server0 = await serverCpu(subject.redis);
  const client0 = process.cpuUsage();
  const until = performance.now() + ms;
  const started = performance.now();
  const waits = [];
  let releaseMs = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        const lease = await subject.slots.acquire("k", { waitMs: 30_000 });
        waits.push(performance.now() - t0);
        await body();
        const t1 = performance.now();
        await lease.release();
        releaseMs += performance.now() - t1;
        done++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const client = process.cpuUsage(client0);
  subject.clientUs.push((client.user + client.system) / done);
  subject.serverUs.push((((await serverCpu(subject.redis)) - server0) * 1e6) / done);
  waits.sort((a, b) => a - b);
  subject.ratios.push(done / seconds / (limit / (bodyMs / 1000)));
  subject.p99.push(waits[Math.floor(waits.length * 0.99)]);
  subject.releaseMs.push(releaseMs / done);
}

for (let r = 0; r < rounds; r++) {
  // Each round in another order: no subject always runs first or last.
  const order = r % 2 === 0 ? subjects : [...subjects].reverse();
  for (const subject of order) await run(subject);
}
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const fixed = (list, digits) => list.map((n) => n.toFixed(digits)).join(" ");
for (const { name, ratios, p99, releaseMs, clientUs, serverUs } of subjects) {
  console.log(
    `${name}: of limit/body median ${median(ratios).toFixed(3)} [${fixed(ratios, 3)}]; wait p99 median ${median(p99).toFixed(1)} ms; release ms median ${median(releaseMs).toFixed(2)}; CPU µs per hand-off, client ${median(clientUs).toFixed(0)} [${fixed(clientUs, 0)}], server ${median(serverUs).toFixed(0)} [${fixed(serverUs, 0)}]`,
  );
}
for (const { redis } of subjects) redis.disconnect();
process.exit(0);
