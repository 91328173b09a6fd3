// One writer for the fencing scenario (17): loops locks.run() on one lock and,
// inside, writes to the protected resource (a Postgres row behind HTTP, see
// fencing.test.ts) with its lease's fence, after a pause. It does not listen
// to its lease's signal before writing, on purpose: it is the holder the
// fence exists for, paused (the test SIGSTOPs it) past its lease, that
// resumes and writes as if nothing happened. Logs every step as a JSON line.
import { Redis } from "ioredis";
import { LeaseholdError, lock, redisStore } from "../../src/index.js";

const env = (name: string, fallback: number): number => Number(process.env[name] ?? fallback);
const redis = new Redis(process.env.REDIS_URL as string, { maxRetriesPerRequest: null });
redis.on("error", () => {});
const locks = lock({
  client: redisStore(redis, { timeoutMs: 1000, waiterLeaseMs: 600 }),
  prefix: process.env.PREFIX ?? "fencing",
  ttlMs: env("TTL_MS", 600),
});
const holdMin = env("HOLD_MIN", 150);
const holdMax = env("HOLD_MAX", 250);
const deadline = performance.now() + env("DURATION_MS", 10_000);
const db = process.env.DB_URL as string;

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, pid: process.pid, t: process.hrtime.bigint().toString() })}\n`);
}

async function write(fence: number, token: string): Promise<boolean> {
  const response = await fetch(`${db}/write`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ fence, writer: `${process.pid}:${token.slice(0, 6)}` }),
  });
  return ((await response.json()) as { accepted: boolean }).accepted;
}

emit({ e: "ready" });
while (performance.now() < deadline) {
  let token: string | undefined;
  try {
    await locks.run(
      "row",
      async (lease) => {
        token = lease.token;
        emit({ e: "enter", tok: token, fence: lease.fence });
        lease.signal.addEventListener("abort", () => emit({ e: "lost", tok: token }), { once: true });
        await new Promise((resolve) => setTimeout(resolve, holdMin + Math.random() * (holdMax - holdMin)));
        const accepted = await write(lease.fence, lease.token);
        emit({ e: "wrote", tok: token, fence: lease.fence, accepted });
        emit({ e: "exit", tok: token });
      },
      { waitMs: env("WAIT_MS", 5000) },
    );
    emit({ e: "released", tok: token });
  } catch (error) {
    const code = error instanceof LeaseholdError ? error.code : String(error);
    emit({ e: code === "ERR_LOCK_LEASE_LOST" ? "run-lost" : "error", tok: token, code });
  }
}
emit({ e: "finished" });
redis.disconnect();
