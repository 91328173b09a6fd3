import type { Store } from "../contract/types.js";

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
 * An ioredis `Redis` or `Cluster`, or an iovalkey one (the ioredis fork for
 * Valkey): commands in lower case, replies as promises, connected on their
 * own. Typed structurally: any client with `evalsha` and `eval` fits.
 */
export interface IoredisLikeClient {
  evalsha(...args: never[]): Promise<unknown>;
  eval(...args: never[]): Promise<unknown>;
  duplicate?(...args: never[]): unknown;
}

/**
 * A node-redis client (`createClient()`) or cluster (`createCluster()`), from
 * the `redis` or `@redis/client` package, v5 or later. It may be passed before
 * it is connected: leasehold connects it on first use (see the README, Clients).
 */
export interface NodeRedisLikeClient {
  evalSha(...args: never[]): Promise<unknown>;
  connect(): Promise<unknown>;
  readonly isOpen: boolean;
}

/** A Redis client leasehold can use: see {@link IoredisLikeClient} and {@link NodeRedisLikeClient}. */
export type RedisClient = IoredisLikeClient | NodeRedisLikeClient;
