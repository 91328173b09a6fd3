import { Redis, type RedisOptions } from "ioredis";
import { Valkey } from "iovalkey";
import { createClient } from "redis";
import { createClient as createClient5 } from "redis5";
import { afterAll, inject } from "vitest";
import type { NodeRedisLikeClient } from "../../src/store/index.js";

const opened: { close(): unknown }[] = [];

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
  opened.push({ close: () => client.disconnect() });
  return client;
}

/** An iovalkey client (the ioredis fork for Valkey), closed after the file's tests. */
export function newValkey(url = redisUrl()): Valkey {
  const client = new Valkey(url);
  client.on("error", () => {});
  opened.push({ close: () => client.disconnect() });
  return client;
}

/** The node-redis majors under test: the current one (package `redis`) and v5 (`redis5`, an npm alias). */
export type NodeRedisMajor = 6 | 5;

/** What the tests use of a node-redis client, whichever major made it. */
export interface NodeRedis extends NodeRedisLikeClient {
  on(event: "error", listener: (error: Error) => void): unknown;
  listenerCount(event: string): number;
  sendCommand(args: string[]): Promise<unknown>;
  destroy(): void;
}

/**
 * A node-redis client, closed after the file's tests. `connect: false` leaves
 * it unconnected, as a user may pass it: leasehold connects it on first use.
 */
export function newNodeRedis(major: NodeRedisMajor, { url = redisUrl(), connect = true } = {}): NodeRedis {
  const client: NodeRedis = major === 6 ? createClient({ url }) : createClient5({ url });
  // node-redis emits an 'error' event on every failed reconnect; the test sees the calls fail instead.
  if (connect) {
    client.on("error", () => {});
    client.connect().catch(() => {});
  }
  opened.push({ close: () => (client.isOpen ? client.destroy() : undefined) });
  return client;
}

afterAll(async () => {
  for (const client of opened.splice(0)) client.close();
});

/** A fresh key prefix, so tests sharing one server never see each other's keys. */
export function uniquePrefix(label = "t"): string {
  return `${label}-${Math.random().toString(36).slice(2, 10)}`;
}

/** The connections leasehold duplicates from `client` (the subscriber a store opens for itself), so that a test can see them end. */
export function watchDuplicates(client: Redis): Redis[] {
  const duplicates: Redis[] = [];
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (...args) => {
    const made = duplicate(...args);
    duplicates.push(made);
    return made;
  };
  return duplicates;
}
