// Shared by the examples: Redis when REDIS_URL is set, else the embedded store.
import { Redis } from "ioredis";
import type { ClientInput } from "../src/index.js";

export function exampleClient(): { client: ClientInput | undefined; label: string } {
  const url = process.env.REDIS_URL;
  if (!url) return { client: undefined, label: "the embedded memory store" };
  return { client: new Redis(url), label: `Redis at ${url}` };
}

export const port = (): number => Number(process.env.PORT ?? 3000);
