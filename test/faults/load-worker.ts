// One load process for the fault scenarios: CALLERS concurrent callers loop
// run() on one semaphore until DURATION_MS has passed, logging every step as
// a JSON line with process.hrtime.bigint() (comparable across processes on
// one host). Exits on its own. CLIENT picks the client library: ioredis (the
// default) or node-redis.
import { LeaseholdError, redisStore, semaphore } from "../../src/index.js";
import { faultClient } from "./clients.js";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const skew = env("SKEW_MS", 0);
if (skew !== 0) {
  // Injected client clock skew: only wall-clock readers see it (leasehold reads none).
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + skew;
}

const redis = await faultClient(process.env.CLIENT ?? "ioredis", process.env.REDIS_URL as string);
const store = redisStore(redis.client, { timeoutMs: env("TIMEOUT_MS", 1000), waiterLeaseMs: env("WAITER_LEASE_MS", 5000) });
const limit = env("LIMIT", 20);
const slots = semaphore({ client: store, prefix: process.env.PREFIX ?? "faults", limit, leaseMs: env("LEASE_MS", 2000) });
// Mixed limits (LIMITS="4,6,8": caller n passes the n-th, cyclically), weights 1..WEIGHT_MAX, and
// queueing for up to WAIT_MS instead of failing fast: the waiting room under the same checker.
const limits = (process.env.LIMITS ?? "").split(",").filter(Boolean).map(Number);
const weightMax = env("WEIGHT_MAX", 1);
const waitMs = env("WAIT_MS", 0);
const id = process.env.ID ?? "k";
const holdMin = env("HOLD_MIN", 5);
const holdMax = env("HOLD_MAX", 50);
const blockMs = env("BLOCK_MS", 0);
const heartbeat = process.env.HEARTBEAT_MS === undefined ? undefined : env("HEARTBEAT_MS", 0);
const deadline = performance.now() + env("DURATION_MS", 3000);

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, pid: process.pid, t: process.hrtime.bigint().toString() })}\n`);
}

async function caller(n: number): Promise<void> {
  const own = limits.length > 0 ? (limits[n % limits.length] as number) : limit;
  while (performance.now() < deadline) {
    let token: string | undefined;
    const weight = 1 + Math.floor(Math.random() * Math.min(weightMax, own));
    // When this call was made: the store admitted it later, so whoever entered before now was admitted before it.
    const sent = process.hrtime.bigint().toString();
    try {
      await slots.run(
        id,
        async (lease) => {
          token = lease.token;
          emit({ e: "enter", tok: token, w: weight, l: own, sent });
          lease.signal.addEventListener("abort", () => emit({ e: "lost", tok: token }), { once: true });
          if (blockMs > 0) {
            const until = performance.now() + blockMs;
            while (performance.now() < until) {
              // block the event loop on purpose
            }
          } else {
            await new Promise((resolve) => setTimeout(resolve, holdMin + Math.random() * (holdMax - holdMin)));
          }
          emit({ e: "exit", tok: token });
        },
        {
          ...(heartbeat === undefined ? {} : { heartbeatMs: heartbeat }),
          ...(limits.length > 0 ? { limit: own } : {}),
          ...(weight > 1 ? { weight } : {}),
          ...(waitMs > 0 ? { waitMs } : {}),
        },
      );
      emit({ e: "released", tok: token });
    } catch (error) {
      const code = error instanceof LeaseholdError ? error.code : String(error);
      if (code === "ERR_SEMAPHORE_NOT_ACQUIRED") {
        await new Promise((resolve) => setTimeout(resolve, 2 + Math.random() * 10));
      } else {
        emit({ e: code === "ERR_SEMAPHORE_LEASE_LOST" ? "run-lost" : "error", tok: token, code, caller: n });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }
}

emit({ e: "ready" });
await Promise.all(Array.from({ length: env("CALLERS", 10) }, (_, n) => caller(n)));
emit({ e: "finished" });
redis.close();
