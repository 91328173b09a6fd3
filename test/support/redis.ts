import { Redis, type RedisOptions } from "ioredis";
import { afterAll, inject } from "vitest";

const opened: Redis[] = [];

/** The run's Redis URL (REDIS_URL, or the private server global set-up started). */
export function redisUrl(): string {
  return inject("redisUrl");
}

/**
 * A connected ioredis client, closed after the file's tests. `replyMapping` is left out of the
 * options: ioredis 6 declares it `| undefined` in `RedisOptions` but not in its constructor, which
 * `exactOptionalPropertyTypes` refuses.
 */
export function newRedis(url = redisUrl(), options: Omit<RedisOptions, "replyMapping"> = {}): Redis {
  const client = new Redis(url, { lazyConnect: false, ...options });
  // Tests that break Redis on purpose expect connection errors; they surface through commands.
  client.on("error", () => {});
  opened.push(client);
  return client;
}

afterAll(async () => {
  for (const client of opened.splice(0)) client.disconnect();
});

/** A fresh key prefix, so tests sharing one server never see each other's keys. */
export function uniquePrefix(label = "t"): string {
  return `${label}-${Math.random().toString(36).slice(2, 10)}`;
}
