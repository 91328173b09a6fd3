import type { Store } from "../contract/types.js";
import type { RedisClient } from "../redis/types.js";

/**
 * What `client` accepts: a store, a Redis client (an ioredis or iovalkey
 * `Redis` or `Cluster`, a node-redis `createClient()` or `createCluster()`,
 * recognised by shape), a promise of either, or a function returning either
 * (called once, on first use, and again only if it failed).
 *
 * @example
 * ```ts
 * const client: ClientInput = redisStore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { timeoutMs: 500 });
 * ```
 */
export type ClientInput =
  | Store
  | RedisClient
  | PromiseLike<Store | RedisClient>
  | (() => Store | RedisClient | PromiseLike<Store | RedisClient>);

/**
 * Whether a store answers, as this process has seen it: `up`, or `down`
 * since a call failed to reach it, with when the next probe goes out.
 *
 * @example
 * ```ts
 * const health: StoreHealth = await slots.health();
 * if (health.state === "down") log.warn({ nextProbeInMs: health.nextProbeInMs }, "leasehold store down");
 * ```
 */
export interface StoreHealth {
  state: "up" | "down";
  /** The store's kind (`"redis"`, `"memory"`, a custom store's). */
  store: string;
  /** While down: ms since the first failure. */
  downForMs?: number;
  /** While down: ms until the next probe (what a refused caller's `Retry-After` says). */
  nextProbeInMs?: number;
  /** While down: the failure that took it down, or the last probe's. */
  lastError?: Error;
}
