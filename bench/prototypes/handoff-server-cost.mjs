// Server instructions per contended hand-off, by script: how much the full path (waiting room)
// costs the Redis server, load-independent. Run (after `npm run build`):
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p redis-server --port 6395 --save '' --appendonly no &
//   node bench/prototypes/handoff-server-cost.mjs 6395 200   # then again with 400; diff the EVALSHA counts
// CONFIRM=0: no confirming extend, as in the contended benchmark, whose 5 ms bodies end before it is due.
// or, without valgrind, `INFO commandstats` figures per step (printed at the end).
// Steady state of the contended benchmark: limit 16, 16 holders, 48 waiters; each step is one
// hand-off: a holder releases (the full release grants the head waiter), the granted waiter
// confirms with an extend, and the releaser joins the queue again (a full acquire that waits).
import { Redis } from "ioredis";
import { redisStore } from "../../dist/esm/src/index.js";

const port = Number(process.argv[2] ?? 6395);
const steps = Number(process.argv[3] ?? 200);
const client = new Redis({ port });
const store = redisStore(client);
const storeKey = `{handoff:${Date.now()}}`;
const limit = 16;
const queue = { waiterLeaseMs: 60_000, maxQueue: 0 };
let n = 0;
const token = () => `t${(n++).toString(36).padStart(8, "0")}`;
const holders = [];
const waiters = [];
for (let i = 0; i < limit; i++) {
  const t = token();
  const reply = await store.semaphore.acquire({ storeKey, token: t, limit, weight: 1, leaseMs: 60_000, queue });
  if (!reply.acquired) throw new Error("setup: not acquired");
  holders.push(t);
}
for (let i = 0; i < 48; i++) {
  const t = token();
  const reply = await store.semaphore.acquire({ storeKey, token: t, limit, weight: 1, leaseMs: 60_000, queue });
  if (!reply.queued) throw new Error("setup: not queued");
  waiters.push(t);
}
await client.config("RESETSTAT");
const counts = { release: 0, extend: 0, join: 0, refresh: 0 };
if (process.env.PAUSE) {
  console.error("ready");
  await new Promise((r) => setTimeout(r, 1500));
}
for (let s = 0; s < steps; s++) {
  const out = holders.shift();
  const released = await store.semaphore.release({ storeKey, token: out, weight: 1, heldMs: 5 });
  counts.release++;
  if (released !== true && released?.ok !== true && typeof released !== "object")
    throw new Error(`release answered ${JSON.stringify(released)}`);
  const head = waiters.shift();
  if (process.env.CONFIRM !== "0") {
    const ok = await store.semaphore.extend({ storeKey, token: head, leaseMs: 60_000, weight: 1 });
    counts.extend++;
    if (ok !== true) throw new Error(`the head was not granted: extend answered ${JSON.stringify(ok)}`);
  }
  holders.push(head);
  const again = await store.semaphore.acquire({ storeKey, token: out, limit, weight: 1, leaseMs: 60_000, queue });
  counts.join++;
  if (!again.queued) throw new Error("join: not queued");
  waiters.push(out);
  if (s % 16 === 0) {
    await store.semaphore.refreshWaiters({ storeKey, tokens: waiters, waiterLeaseMs: 60_000 });
    counts.refresh++;
  }
}
const stats = await client.info("commandstats");
let inner = 0;
for (const line of stats.split("\n")) {
  const m = /^cmdstat_(\w+):calls=(\d+),usec=(\d+)/.exec(line);
  if (!m) continue;
  if (m[1] === "evalsha")
    console.log(`evalsha per step: ${(Number(m[2]) / steps).toFixed(2)}, usec per step ${(Number(m[3]) / steps).toFixed(1)}`);
  else if (m[1] !== "config" && m[1] !== "info") inner += Number(m[2]);
}
console.log(`redis.call()s per step: ${(inner / steps).toFixed(1)}`, counts);
await store.close?.();
client.disconnect();
