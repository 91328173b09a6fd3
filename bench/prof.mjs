import { Redis } from "ioredis";
import { semaphore } from "../dist/esm/src/index.js";
const redis = new Redis(process.env.REDIS_URL);
const slots = semaphore(redis, { limit: 100000, prefix: "prof" });
const until = performance.now() + 3000; let n = 0;
await Promise.all(Array.from({ length: 64 }, async () => { while (performance.now() < until) { const l = await slots.acquire("k"); await l?.release(); n++; } }));
console.log(Math.round(n / 3), "cycles/s");
redis.disconnect();
