// A process that holds leases, runs bodies and waits in queues, then closes everything leasehold
// gave it on SIGTERM, quits its own Redis client, and must exit by itself: no process.exit.
// CLIENT: ioredis | node-redis | memory; STORE: implicit (the client itself) | explicit (a store made of it).
import { Redis } from "ioredis";
import { createClient } from "redis";
import { type ClientInput, lock, memoryStore, redisStore, semaphore } from "../../src/index.js";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const kind = process.env.CLIENT ?? "ioredis";
const explicit = process.env.STORE === "explicit";
const prefix = process.env.PREFIX ?? "shutdown";

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/** What a call came to: its value, or the name of the error it rejected with. */
const outcome = (pending: Promise<unknown>): Promise<unknown> =>
  pending.then(
    (value) => (value === null ? "refused" : typeof value === "object" ? "lease" : value),
    (error: unknown) => (error as Error).name,
  );

const ioredis = kind === "ioredis" ? new Redis(url) : undefined;
// node-redis is handed over unconnected: leasehold connects it on first use (but never closes it).
const nodeRedis = kind === "node-redis" ? createClient({ url }) : undefined;
const client = ioredis ?? nodeRedis;
const store = explicit ? (client === undefined ? memoryStore() : redisStore(client)) : undefined;
const given: { client?: ClientInput } = store !== undefined ? { client: store } : client !== undefined ? { client } : {};

const slots = semaphore({ ...given, limit: 2, prefix });
const locks = lock({ ...given, prefix });

/** A body that works until its lease's signal aborts, then rejects with the reason. */
const untilTold = (lease: { signal: AbortSignal }): Promise<never> =>
  new Promise((_, reject) => lease.signal.addEventListener("abort", () => reject(lease.signal.reason), { once: true }));

const held = await slots.acquire("held");
const calls = {
  run: outcome(slots.run("held", untilTold)),
  lockRun: outcome(locks.run("order", untilTold)),
  waiter: outcome(slots.acquire("held", { waitMs: 60_000 })),
  lockWaiter: outcome(locks.acquire("order", { waitMs: 60_000 })),
  heldSignal: new Promise((resolve) => held?.signal.addEventListener("abort", () => resolve(held.signal.reason.name))),
};
while ((await slots.stats("held")).waiting < 1) await new Promise((resolve) => setTimeout(resolve, 10));

process.once("SIGTERM", async () => {
  await Promise.all([slots.close({ graceMs: 500 }), locks.close({ graceMs: 500 })]);
  await store?.close();
  // What still keeps the process alive before the client is quit: that client's, and nothing of leasehold's.
  const resources = process.getActiveResourcesInfo();
  emit({
    event: "closed",
    resources,
    outcomes: Object.fromEntries(await Promise.all(Object.entries(calls).map(async ([n, p]) => [n, await p]))),
  });
  // The client is yours: leasehold never closes it.
  await ioredis?.quit();
  await nodeRedis?.close();
});
emit({ event: "ready", pid: process.pid });
