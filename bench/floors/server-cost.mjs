// The Redis server's cost of one acquire + release cycle, in instructions (issue #12, item 1).
//
//   npm run build                      # the harness drives leasehold as built in dist/
//   node bench/floors/server-cost.mjs [--layer=engine|store|scripts|floor|redis-semaphore]
//        [--cycles=1000] [--held-every=0] [--whole] [--keep] [--dist=path/to/dist/esm/src/index.js] [--port=6391]
//
// Starts a private `redis-server --port 6391 --save '' --appendonly no` under
// `valgrind --tool=callgrind` twice, drives N then 2N sequential cycles from ioredis, and prints
// (Ir(2N) - Ir(N)) / N: the start-up, the connection and the script loading cancel out. Callgrind
// counts the same on a busy or an idle machine, unlike wall-clock time. Layers: `engine`
// (semaphore().acquire / release, what `npm run bench` runs), `store` (redisStore's calls, with a
// hold reported on every `--held-every`th release, 0: never), `scripts` (the two fast scripts by
// EVALSHA, nothing around them), `floor` (./floor-scripts.mjs: the cheapest pair with the same
// guarantees), `redis-semaphore` (its own acquire + release, for reference),
// `handoff` (the contended benchmark's hand-offs, `--batch` releases in one turn: see the driver), and
// `handoff-floor` (the same through bench/floors/handoff-floor.mjs).
// `--dist` points at another build (e.g. main's, built in a clean copy) to compare old and new.
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Redis } from "ioredis";

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const layer = arg("layer", "engine");
const cycles = Number(arg("cycles", "1000"));
const heldEvery = Number(arg("held-every", "0"));
const batch = Number(arg("batch", "1"));
const port = Number(arg("port", "6391"));
// Without --whole, only what the server does for requests is counted: reading and running them
// (readQueryFromClient) and writing the replies (writeToClient). Its cron and idle loop run by the
// clock, and under valgrind the clock runs at the machine's load: counted, they add noise.
const whole = process.argv.includes("--whole");
// --keep leaves the callgrind files for callgrind_annotate.
const keep = process.argv.includes("--keep");
const ONLY_REQUESTS = ["--toggle-collect=readQueryFromClient", "--toggle-collect=writeToClient"];
const here = fileURLToPath(new URL(".", import.meta.url));
const dist = resolve(arg("dist", join(here, "../../dist/esm/src/index.js")));
const lib = await import(pathToFileURL(dist).href);

/** One server run under callgrind: drives `n` cycles, returns the instructions it counted. */
async function count(n) {
  const out = join(tmpdir(), `server-cost-${process.pid}-${n}.out`);
  // Another server on the port would be driven (and shut down) in place of ours.
  if (await listening()) throw new Error(`port ${port} is taken: pass --port`);
  const server = spawn(
    "valgrind",
    [
      "--tool=callgrind",
      `--callgrind-out-file=${out}`,
      ...(whole ? [] : ONLY_REQUESTS),
      "redis-server",
      "--port",
      String(port),
      "--save",
      "",
      "--appendonly",
      "no",
    ],
    { stdio: "ignore" },
  );
  const exited = new Promise((done) => server.on("exit", done));
  // Valgrind takes seconds to start the server: wait for its port before connecting.
  while (!(await listening())) await new Promise((wait) => setTimeout(wait, 200));
  const redis = new Redis({ port, retryStrategy: () => null });
  const started = performance.now();
  try {
    const cycle = await driver(redis);
    // One cycle first in both runs: script loading (NOSCRIPT, then EVAL) happens once, outside the difference.
    await cycle(0);
    for (let i = 1; i <= n; i++) await cycle(i);
  } catch (error) {
    server.kill();
    throw error;
  }
  const driven = performance.now();
  await redis.call("SHUTDOWN", "NOSAVE").catch(() => {});
  redis.disconnect();
  await exited;
  const ms = (t) => Math.round(performance.now() - t);
  console.error(`${n} cycles: driven in ${ms(started) - ms(driven)} ms, server gone ${ms(driven)} ms later`);
  const text = readFileSync(out, "utf8");
  if (keep) console.error(`kept ${out} (callgrind_annotate --inclusive=yes ${out})`);
  else rmSync(out);
  const total = /^(?:summary|totals):\s+(\d+)/m.exec(text);
  if (!total) throw new Error(`no total in ${out}`);
  return Number(total[1]);
}

/** Whether the server accepts connections yet. */
function listening() {
  return new Promise((answer) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      answer(true);
    });
    socket.once("error", () => answer(false));
  });
}

/** The cycle of the chosen layer, on a fresh client. */
async function driver(redis) {
  const limit = 100_000;
  if (layer === "engine") {
    // A long store timeout: under valgrind on a busy machine a reply can take seconds.
    const slots = lib.semaphore(lib.redisStore(redis, { timeoutMs: 60_000 }), { limit, prefix: "cost" });
    return async () => (await slots.acquire("k"))?.release();
  }
  if (layer === "store") {
    const store = lib.redisStore(redis, { timeoutMs: 60_000 });
    const storeKey = "{cost:k}";
    return async (i) => {
      const token = `t${i}`;
      const reply = await store.semaphore.acquire({ storeKey, token, limit, weight: 1, leaseMs: 30_000 });
      if (!reply.acquired) throw new Error("refused");
      const heldMs = heldEvery > 0 && i % heldEvery === 0 ? 5 : undefined;
      await store.semaphore.release({ storeKey, token, weight: 1, heldMs });
    };
  }
  if (layer === "handoff") {
    // The contended benchmark's steady state (limit 16, 16 holders, 48 waiters): per cycle, `--batch`
    // holders release in one turn (as bodies started in one turn end in one), each release granting
    // the head waiter, then the releasers join the queue again in one turn (--joins=0: not). Per hand-off: divide by
    // the batch (printed as perHandOff).
    const store = lib.redisStore(redis, { timeoutMs: 60_000 });
    const storeKey = `{cost:h${Date.now()}}`;
    const queue = { waiterLeaseMs: 600_000, maxQueue: 0 };
    const call = (token) => ({ storeKey, token, limit: 16, weight: 1, leaseMs: 600_000, queue });
    const holders = [];
    const waiters = [];
    // --joins=0: the releases alone (the releasers do not join again: enough waiters for both runs).
    const joins = arg("joins", "1") !== "0";
    for (let i = 0; i < (joins ? 64 : 64 + 2 * cycles * batch); i++) {
      const reply = await store.semaphore.acquire(call(`h${i}`));
      (reply.acquired ? holders : waiters).push(`h${i}`);
    }
    if (holders.length !== 16) throw new Error("setup: not 16 holders");
    // As in the benchmark, a subscriber hears the grants (the PUBLISHes then write to it).
    await store.watch({ storeKey, onGrant: () => {} });
    return async () => {
      const out = holders.splice(0, batch);
      const released = await Promise.all(
        out.map((token) => store.semaphore.release({ storeKey, token, weight: 1, heldMs: undefined })),
      );
      if (!released.every((live) => live === true)) throw new Error("a release was not live");
      holders.push(...waiters.splice(0, batch));
      if (!joins) return;
      const joined = await Promise.all(out.map((token) => store.semaphore.acquire(call(token))));
      if (!joined.every((reply) => reply.queued)) throw new Error("a join was not queued");
      waiters.push(...out);
    };
  }
  if (layer === "handoff-floor") {
    // The same steady state through bench/floors/handoff-floor.mjs (the cheapest hand-off found
    // with the guarantees the benchmark exercises): `--batch` releases in one turn, each granting the
    // head waiter (heard in the release's reply), then the releasers join again in one turn; a PING
    // on the same connection answers once the joins have run. Per hand-off: perHandOff.
    const floor = await import(pathToFileURL(join(here, "handoff-floor.mjs")).href);
    const slots = floor.semaphore({ client: redis, limit: 16, prefix: `cost-floor${Date.now()}`, leaseMs: 600_000 });
    const holders = await Promise.all(Array.from({ length: 16 }, () => slots.acquire("k", { waitMs: 600_000 })));
    const waiters = Array.from({ length: 48 }, () => slots.acquire("k", { waitMs: 600_000 }));
    await redis.ping();
    return async () => {
      const out = holders.splice(0, batch);
      const released = await Promise.all(out.map((lease) => lease.release()));
      if (!released.every((live) => live === true)) throw new Error("a release was not live");
      holders.push(...(await Promise.all(waiters.splice(0, batch))));
      for (let i = 0; i < batch; i++) waiters.push(slots.acquire("k", { waitMs: 600_000 }));
      await redis.ping();
    };
  }
  if (layer === "scripts") {
    const { scripts } = await import(pathToFileURL(join(dist, "../store/redis/lua.generated.js")).href);
    const take = await redis.script("LOAD", scripts.semaphoreAcquireFast.source);
    const give = await redis.script("LOAD", scripts.semaphoreReleaseFast.source);
    return async (i) => {
      const token = `t${i}`;
      await redis.evalsha(take, 1, "{cost:k}", token, limit, 30_000);
      await redis.evalsha(give, 1, "{cost:k}", token);
    };
  }
  if (layer === "floor") {
    // The cheapest pair with the fast cycle's guarantees (./floor-scripts.mjs): the floor of this harness.
    const { floorScripts } = await import("./floor-scripts.mjs");
    const take = await redis.script("LOAD", floorScripts.take.source);
    const give = await redis.script("LOAD", floorScripts.back.source);
    return async (i) => {
      const token = `t${i}`;
      if ((await redis.evalsha(take, 1, "{cost:k}", token, limit, 30_000)) < 0) throw new Error("refused");
      await redis.evalsha(give, 1, "{cost:k}", token);
    };
  }
  if (layer === "redis-semaphore") {
    const { Semaphore } = await import("redis-semaphore");
    return async () => {
      const held = new Semaphore(redis, "rs-cost", limit, { refreshInterval: 0, acquireAttemptsLimit: 1 });
      await held.acquire();
      await held.release();
    };
  }
  throw new Error(`unknown --layer=${layer}`);
}

const once = await count(cycles);
const twice = await count(2 * cycles);
const per = Math.round((twice - once) / cycles);
const perHandOff = layer.startsWith("handoff") ? Math.round(per / batch) : undefined;
console.log(
  JSON.stringify({ layer, dist, cycles, batch, heldEvery, whole, instructions: [once, twice], perCycle: per, perHandOff }),
);
