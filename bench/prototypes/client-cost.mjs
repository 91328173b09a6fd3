// The client's CPU cost of one Redis acquire + release cycle, layer by layer, for counting
// instructions: on this shared machine wall-clock figures swing by 2x, instruction counts do not.
//
//   npm run build
//   redis-server --port 6392 --save '' --appendonly no --daemonize yes
//   LAYER=store C=64 N=4000 valgrind --tool=callgrind --callgrind-out-file=/dev/null node --single-threaded bench/prototypes/client-cost.mjs
//   LAYER=store C=64 N=8000 valgrind ... (the same)
//   redis-cli -p 6392 shutdown nosave
//
// (instructions at 2N - instructions at N) / N = instructions per cycle, start-up and warm-up cancelled.
// It also prints the process's CPU µs per cycle (user + system; a rougher figure, and inflated under
// valgrind) and the script calls per cycle the server ran (2 without coalescing; fewer with it).
// LAYER: rs (redis-semaphore's acquire + release, for comparison), ioredis (the two fast scripts by EVALSHA from ioredis, nothing around them), store
// (`redisStore(redis).semaphore.acquire` and `release`: the store layer and its coalescing),
// bounded (the same through the engine's store calls: `acquireOrCleanUp` and `bounded`, with their
// timer and breaker), engine (`semaphore(redis).acquire` and `lease.release()`).
// C: callers looping at once (1, 8, 64). PORT: the private redis-server (6392).
// DIST: the build to measure (default ../../dist; a copy of main's dist to compare).
import { Redis } from "ioredis";

const layer = process.env.LAYER ?? "store";
const concurrency = Number(process.env.C ?? 1);
const total = Number(process.env.N ?? 4000);
const warmUp = Number(process.env.WARM ?? 2000);
const port = Number(process.env.PORT ?? 6392);
const dist = process.env.DIST ?? new URL("../../dist", import.meta.url).pathname;

const lib = await import(`${dist}/esm/src/index.js`);
const storeCall = await import(`${dist}/esm/src/store/access/bounded.js`);
const { scripts } = await import(`${dist}/esm/src/store/redis/lua.generated.js`);

const redis = new Redis({ port, lazyConnect: true });
await redis.connect();
const LIMIT = 1_000_000;
const LEASE_MS = 60_000;
const storeKey = `{cc-${layer}-${process.pid}:k}`;
// As long as the engine's tokens (a stamped 128-bit token): the same bytes on the wire.
let n = 0;
const token = () => `cc${(n++).toString(36).padStart(8, "0")}.AAAAAAAAAAAAAAAAAAAAAAAA`;

async function ioredisCycle() {
  const t = token();
  const { semaphoreTake: take, semaphoreReturn: back } = scripts;
  await redis.evalsha(take.sha, 1, storeKey, t, LIMIT, LEASE_MS);
  await redis.evalsha(back.sha, 1, storeKey, t);
}

// A bound far above any round trip under valgrind (50x slower): a timeout would end the run early.
const store = lib.redisStore(redis, { timeoutMs: 600_000 });
async function storeCycle() {
  const t = token();
  const reply = await store.semaphore.acquire({ storeKey, token: t, limit: LIMIT, weight: 1, leaseMs: LEASE_MS });
  if (!reply.acquired) throw new Error("refused");
  await store.semaphore.release({ storeKey, token: t, weight: 1, heldMs: undefined });
}

// The engine's view of a semaphore id (an AcquireCalls): what acquireOrCleanUp and leave call.
const ops = {
  subject: { kind: "semaphore", key: "k" },
  kind: "semaphore",
  storeKey,
  take: (s, t, queue) => s.semaphore.acquire({ storeKey, token: t, limit: LIMIT, weight: 1, leaseMs: LEASE_MS, queue }),
  leave: (s, t) => s.semaphore.leave({ storeKey, token: t }),
};
const isFlag = (reply) => typeof reply === "boolean";
async function boundedCycle() {
  const t = token();
  const reply = await storeCall.acquireOrCleanUp(store, ops, t);
  if (!reply.acquired) throw new Error("refused");
  await storeCall.bounded(
    store,
    "release",
    storeCall.send(() => store.semaphore.release({ storeKey, token: t, weight: 1, heldMs: undefined })),
    isFlag,
    ops.subject,
  );
}

const slots = lib.semaphore(store, { limit: LIMIT, prefix: `cc-engine-${process.pid}` });
async function engineCycle() {
  const lease = await slots.acquire("k");
  if (lease === null) throw new Error("refused");
  await lease.release();
}

// redis-semaphore's own cycle (a new Semaphore per cycle, as its README does), for comparison.
const { Semaphore: RedisSemaphore } = await import("redis-semaphore");
async function rsCycle() {
  const held = new RedisSemaphore(redis, `cc-rs-${process.pid}`, LIMIT, { refreshInterval: 0, acquireAttemptsLimit: 1 });
  await held.acquire();
  await held.release();
}

const cycle = { rs: rsCycle, ioredis: ioredisCycle, store: storeCycle, bounded: boundedCycle, engine: engineCycle }[layer];
if (cycle === undefined) throw new Error(`LAYER=${layer}: one of rs, ioredis, store, bounded, engine`);
await redis.script("LOAD", scripts.semaphoreTake.source);
await redis.script("LOAD", scripts.semaphoreReturn.source);

/** `count` cycles from `concurrency` loops. */
async function run(count) {
  let left = count;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left > 0) {
        left--;
        await cycle();
      }
    }),
  );
}

/** Script calls the server has run: how many items a coalesced call carried, on average. */
async function scriptCalls() {
  const stats = await redis.info("commandstats");
  return [...stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, [, , calls]) => sum + Number(calls), 0);
}

await run(warmUp);
const callsBefore = await scriptCalls();
const before = process.cpuUsage();
await run(total);
const spent = process.cpuUsage(before);
const calls = (await scriptCalls()) - callsBefore;
await slots.close();
await store.close();
redis.disconnect();
const micros = (spent.user + spent.system) / total;
process.stdout.write(
  `done: ${layer} C=${concurrency} N=${total}: ${micros.toFixed(1)} µs CPU per cycle, ${(calls / total).toFixed(2)} script calls per cycle\n`,
);
