// Shared by the examples: Redis when REDIS_URL is set, else the embedded store.
import { Redis } from "ioredis";
import { type ClientInput, memoryStore } from "../src/index.js";

export function exampleClient(): { client: ClientInput; label: string } {
  const url = process.env.REDIS_URL;
  if (!url) return { client: memoryStore(), label: "the embedded memory store" };
  const redis = new Redis(url);
  // Without a listener, a connection error would crash the process; ioredis reconnects on its own.
  redis.on("error", (error) => console.error(`Redis: ${error.message}`));
  return { client: redis, label: `Redis at ${url}` };
}

export const port = (): number => Number(process.env.PORT ?? 3000);
