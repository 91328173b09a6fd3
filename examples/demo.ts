// npm start: 25 callers race for a semaphore with 20 permits. 20 are
// admitted, 5 are shed at once. Runs on the embedded store, and on Redis
// too when REDIS_URL is set.
import { Redis } from "ioredis";
import { type ClientInput, memoryStore, SemaphoreNotAcquiredError, semaphore } from "../src/index.js";

const CALLERS = 25;
const LIMIT = 20;
const HOLD_MS = 300;

async function race(label: string, client: ClientInput): Promise<void> {
  const slots = semaphore({ client, limit: LIMIT, leaseMs: 10_000, prefix: `demo-${process.pid}` });
  let inFlight = 0;
  let peak = 0;
  let shed = 0;
  const calls = Array.from({ length: CALLERS }, () =>
    slots
      .run("openai", async () => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
        inFlight--;
      })
      .catch((error: unknown) => {
        if (!(error instanceof SemaphoreNotAcquiredError)) throw error;
        shed++;
      }),
  );
  await Promise.all(calls);
  console.log(`${label}`);
  console.log(`  admitted ${CALLERS - shed}, shed ${shed} (SemaphoreNotAcquiredError, at once)`);
  console.log(`  peak in flight ${peak}, holders afterwards ${await slots.count("openai")}`);
}

console.log(`leasehold demo: ${CALLERS} callers, limit ${LIMIT}, each holding its permit for ${HOLD_MS} ms\n`);
await race("embedded memory store", memoryStore());
const url = process.env.REDIS_URL;
if (url) {
  const redis = new Redis(url);
  redis.on("error", (error) => console.error(`Redis: ${error.message}`));
  try {
    await race(`\nRedis at ${url}`, redis);
  } finally {
    redis.disconnect();
  }
} else {
  console.log("\nSet REDIS_URL (e.g. REDIS_URL=redis://127.0.0.1:6379 npm start) to run the same race on Redis.");
}
