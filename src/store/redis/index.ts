// The Redis store's entry: its options and constructor. The store itself is src/store/redis/:
// store.ts (the Store over the full scripts), fast.ts (the fast paths and their coalescing),
// watch.ts (grant announcements), replies.ts (each script's reply, checked) and scripts.ts (calls
// by SHA, with NOSCRIPT recovery).

import { ValidationError } from "../../errors/index.js";
import { STORE_TIMEOUT_MS, WAITER_LEASE_MS } from "../../options/defaults.js";
import { knownOptions, optionsObject, positiveMs } from "../../options/validate.js";
import type { Store } from "../contract/types.js";
import { ACCEPTED_CLIENTS, isRedisClient, type RedisClient } from "./clients.js";
import { scripts } from "./lua.generated.js";
import type { Scripts } from "./scripts.js";
import { RedisLeaseStore } from "./store.js";

export type { IoredisLikeClient, NodeRedisLikeClient, RedisClient } from "./clients.js";
export type { Scripts } from "./scripts.js";
export { parseAnnouncement } from "./watch.js";

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * The longest one round trip may take before the call fails with
   * `StoreUnavailableError`. Bounds what ioredis would otherwise spend in its
   * offline queue (a minute or more) while Redis is down.
   * @default 2000
   */
  timeoutMs?: number;
  /**
   * A waiter's own lease: each process refreshes its waiters' leases (one
   * call per id per third of this), so a waiter whose process dies stops
   * blocking the queue after at most this long.
   * @default 5000
   */
  waiterLeaseMs?: number;
}

/** A Store that also says how long its round trips may take. */
export interface RedisStore extends Store {
  readonly kind: "redis";
  readonly timeoutMs: number;
  readonly waiterLeaseMs: number;
  readonly client: RedisClient;
  /**
   * Closes the connection the store opened for itself (the subscriber that
   * waiting uses, a duplicate of your client) and its timers; every later
   * call is refused with `ShutdownError`, but a release or a leave, which
   * only gives back (a lease an acquire in flight brought still frees its
   * permit through your client). Your client is left open: quit it
   * yourself. Close the semaphores and locks made on the store first: their
   * leases are released through it. A second call returns the same promise.
   *
   * @example
   * ```ts
   * await slots.close();
   * await store.close();
   * await redis.quit();
   * ```
   */
  close(): Promise<void>;
}

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
