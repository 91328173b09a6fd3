// The Redis store's entry (its public types are in types.ts). Beside it: store.ts (the Store over
// the full scripts), fast.ts (the fast paths) and coalesce.ts (their gathering), watch.ts (grant
// announcements), replies.ts (each script's reply, checked), scripts.ts (calls by SHA, with NOSCRIPT
// recovery) over clients.ts (each client library), and lua.generated.ts (lua/, embedded at build).

import { ValidationError } from "../../errors/index.js";
import { STORE_TIMEOUT_MS, WAITER_LEASE_MS } from "../../options/defaults.js";
import { knownOptions, optionsObject, positiveMs } from "../../options/validate.js";
import { ACCEPTED_CLIENTS, isRedisClient } from "./clients.js";
import { scripts } from "./lua.generated.js";
import type { Scripts } from "./scripts.js";
import { RedisLeaseStore } from "./store.js";
import type { RedisClient, RedisStore, RedisStoreOptions } from "./types.js";

/**
 * A store over a Redis server (or Valkey, or a Redis Cluster): the limit
 * holds across every process that points at the same server. Passing a
 * Redis client (ioredis, iovalkey or node-redis) as `client` wraps it in one
 * of these with the defaults; call it yourself to change them.
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { redisStore, semaphore } from "leasehold";
 * const store = redisStore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { timeoutMs: 500 });
 * const slots = semaphore({ client: store, limit: 20 });
 * ```
 */
export function redisStore(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  return createRedisStore(client, options, scripts);
}

/** {@link redisStore} over a given script table: the model-based suite passes one whose clock it sets. */
export function createRedisStore(client: RedisClient, options: RedisStoreOptions, table: Scripts): RedisStore {
  if (!isRedisClient(client)) {
    throw new ValidationError("client", `redisStore(client) needs a Redis client: ${ACCEPTED_CLIENTS}.`);
  }
  const given = optionsObject(options, "redisStore");
  knownOptions(given, ["timeoutMs", "waiterLeaseMs"], "redisStore");
  const timeoutMs =
    given.timeoutMs === undefined
      ? STORE_TIMEOUT_MS
      : positiveMs("timeoutMs", given.timeoutMs, "Pass the longest a Redis round trip may take before failing, e.g. 2000.");
  const waiterLeaseMs =
    given.waiterLeaseMs === undefined
      ? WAITER_LEASE_MS
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without its process refreshing it, e.g. 5000.",
        );
  return new RedisLeaseStore(client, timeoutMs, waiterLeaseMs, table);
}
