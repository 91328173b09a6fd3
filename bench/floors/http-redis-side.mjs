// Where a guarded Hono request's cost goes at 64 connections, per process (issue #12, item 6): the
// HTTP server's CPU per request (/proc/<pid>/stat), the redis-server's CPU per request (INFO cpu),
// its script calls per request and µs per call (INFO commandstats), and requests/s, for each mode of
// bench/http-server.ts, in interleaved rounds (one server process holds every mode). CPU per
// request is what the 2 shared cores decide throughput by; it moves far less with the machine's
// load than requests/s do.
//
//   npm run build
//   redis-server --port 6402 --save '' --appendonly no --daemonize yes
//   REDIS_URL=redis://127.0.0.1:6402 node bench/floors/http-redis-side.mjs [--modes=none,redis,...]
//        [--count=1 (one Redis mode: the server prints its script calls by kind and item count)] [--rounds=5] [--seconds=1.5] [--root=/path/to/another/checkout]  (main's build beside this one)
//
// With --root, a second server process runs the same modes from that checkout's bench/http-server.ts
// and dist/, and the rounds alternate between the two (each row prefixed "main:").
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import autocannon from "autocannon";
import { Redis } from "ioredis";

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const modes = arg("modes", "none,redis,redis-wrapped,redis-bare").split(",");
const rounds = Number(arg("rounds", "5"));
const seconds = Number(arg("seconds", "1.5"));
const connections = Number(arg("connections", "64"));
const other = arg("root", undefined);
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6402";
const redis = new Redis(url);
const ticks = 100; // USER_HZ

const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

async function start(root, label, extra = {}) {
  const ports = [];
  for (const _ of modes) ports.push(await freePort());
  const child = spawn(process.execPath, ["--import", "tsx", "bench/http-server.ts"], {
    cwd: root,
    env: {
      ...process.env,
      COUNT_CALLS: arg("count", "0"),
      ...extra,
      FRAMEWORK: "hono",
      MODES: modes.join(","),
      PORTS: ports.join(","),
      REDIS_URL: url,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve) => child.stdout.on("data", (d) => String(d).includes("listening") && resolve()));
  return { label, child, urls: Object.fromEntries(modes.map((m, i) => [m, `http://127.0.0.1:${ports[i]}/`])) };
}

/** Read and write system calls of a process so far (/proc/<pid>/io): exact counts, whatever the machine's load. */
function syscallsOf(pid) {
  const io = readFileSync(`/proc/${pid}/io`, "utf8");
  return Number(/syscr: (\d+)/.exec(io)[1]) + Number(/syscw: (\d+)/.exec(io)[1]);
}

function cpuOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / ticks; // utime + stime, s
}

async function redisSide() {
  const info = await redis.info("all");
  const cpu = Number(/used_cpu_user:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)[1]);
  const calls = {};
  for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g))
    calls[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return { cpu, calls, syscalls: syscallsOf(Number(/process_id:(\d+)/.exec(info)[1])) };
}

const servers = [await start(process.cwd(), "")];
// --env2=NAME=value: a second server from the same checkout with that variable set (a prototype's switch).
const env2 = arg("env2", undefined);
if (other !== undefined) servers.push(await start(other, "main:"));
else if (env2 !== undefined) servers.push(await start(process.cwd(), "env2:", { [env2.split("=")[0]]: env2.split("=")[1] }));
for (const s of servers) for (const u of Object.values(s.urls)) await autocannon({ url: u, connections, duration: 0.5 });

const samples = {};
for (let round = 0; round < rounds; round++) {
  for (const mode of modes) {
    // The servers take turns going first: whatever favours a position in the round favours both alike.
    for (const s of round % 2 === 0 ? servers : [...servers].reverse()) {
      const before = {
        sys: syscallsOf(s.child.pid),
        cpu: cpuOf(s.child.pid),
        self: process.cpuUsage(),
        redis: await redisSide(),
      };
      const result = await autocannon({ url: s.urls[mode], connections, duration: seconds });
      const after = {
        sys: syscallsOf(s.child.pid),
        cpu: cpuOf(s.child.pid),
        self: process.cpuUsage(before.self),
        redis: await redisSide(),
      };
      const n = result.requests.total;
      const evalsha = (after.redis.calls.evalsha?.calls ?? 0) - (before.redis.calls.evalsha?.calls ?? 0);
      const evalUsec = (after.redis.calls.evalsha?.usec ?? 0) - (before.redis.calls.evalsha?.usec ?? 0);
      const row = {
        rps: result.requests.average,
        serverUs: ((after.cpu - before.cpu) / n) * 1e6,
        redisUs: ((after.redis.cpu - before.redis.cpu) / n) * 1e6,
        loadUs: (after.self.user + after.self.system) / n,
        callsPerReq: evalsha / n,
        serverSys: (after.sys - before.sys) / n,
        redisSys: (after.redis.syscalls - before.redis.syscalls) / n,
        usecPerCall: evalsha ? evalUsec / evalsha : 0,
        p50: result.latency.p50,
        p99: result.latency.p99,
        non2xx: result.non2xx,
      };
      const name = s.label + mode;
      if (samples[name] === undefined) samples[name] = [];
      samples[name].push(row);
    }
  }
}
for (const s of servers) {
  const exited = new Promise((resolve) => s.child.once("exit", resolve));
  s.child.kill();
  await exited;
}
await redis.quit();

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (x, d = 1) => x.toFixed(d);
console.log(
  "mode                 req/s   server µs/req  redis µs/req  load µs/req  evalsha/req  µs/evalsha  p50  p99  non2xx  server sys/req  redis sys/req",
);
for (const [name, rows] of Object.entries(samples)) {
  const m = (k) => median(rows.map((r) => r[k]));
  console.log(
    `${name.padEnd(20)} ${fmt(m("rps"), 0).padStart(6)} ${fmt(m("serverUs")).padStart(14)} ${fmt(m("redisUs")).padStart(13)} ${fmt(m("loadUs")).padStart(12)} ${fmt(m("callsPerReq"), 3).padStart(12)} ${fmt(m("usecPerCall"), 2).padStart(11)} ${String(m("p50")).padStart(4)} ${String(m("p99")).padStart(4)} ${String(m("non2xx")).padStart(6)} ${fmt(m("serverSys"), 2).padStart(15)} ${fmt(m("redisSys"), 2).padStart(14)}`,
  );
}
