import { Redis, type RedisOptions } from "ioredis";
import { afterAll, inject } from "vitest";

const opened: Redis[] = [];

/** The run's Redis URL (REDIS_URL, or the private server global set-up started). */
export function redisUrl(): string {
  return inject("redisUrl");
}

/** A connected ioredis client, closed after the file's tests. */
export function newRedis(url = redisUrl(), options: RedisOptions = {}): Redis {
  const client = new Redis(url, { lazyConnect: false, ...options });
  opened.push(client);
  return client;
}

afterAll(async () => {
  await Promise.all(opened.splice(0).map((client) => client.quit().catch(() => client.disconnect())));
});

/** A fresh key prefix, so tests sharing one server never see each other's keys. */
export function uniquePrefix(label = "t"): string {
  return `${label}-${Math.random().toString(36).slice(2, 10)}`;
}
