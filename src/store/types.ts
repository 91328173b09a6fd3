/**
 * The answer to an acquire attempt. When `acquired` is false,
 * `retryAfterMs` is how long until the nearest current lease ends at the
 * latest (a holder that releases early frees its permit sooner).
 */
export interface AcquireReply {
  acquired: boolean;
  retryAfterMs: number;
}

/**
 * Where leases live. `memoryStore()` and `redisStore()` implement it; anything
 * that passes the conformance suite in `test/conformance/` may. Every method
 * is one atomic step on the store's own clock. `key` is the base key the
 * primitive derives from its prefix and id (`{prefix:id}`); a store may derive
 * companion keys from it.
 *
 * The store never decides policy (retries, renewal, loss): that is the lease
 * keeper's job, so both stores share it.
 */
export interface Store {
  /** `"memory"` or `"redis"`; shown in errors and problem responses. */
  readonly kind: string;

  /**
   * Prune lapsed holders, then take `weight` permits for `token` if they fit
   * under `limit`. Idempotent per token: a token that already holds is
   * refreshed, never counted twice.
   */
  semaphoreAcquire(key: string, token: string, limit: number, weight: number, leaseMs: number): Promise<AcquireReply>;
  /** Push `token`'s expiry to now + `leaseMs`; false unless it holds a live lease. */
  semaphoreExtend(key: string, token: string, leaseMs: number): Promise<boolean>;
  /** Return `token`'s permits; true only if its lease was still live. */
  semaphoreRelease(key: string, token: string): Promise<boolean>;
  /** Live holders (not permits) of the semaphore. */
  semaphoreCount(key: string): Promise<number>;

  /** Take the lock for `token` if free (or refresh it if `token` holds it already). */
  lockAcquire(key: string, token: string, ttlMs: number): Promise<AcquireReply>;
  /** Push the lock's expiry to now + `ttlMs`; false unless `token` holds it. */
  lockExtend(key: string, token: string, ttlMs: number): Promise<boolean>;
  /** Delete the lock; true only if `token` held it. */
  lockRelease(key: string, token: string): Promise<boolean>;
}

/** Tells a store apart from a Redis client, a promise or a factory. */
export function isStore(value: unknown): value is Store {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Store).semaphoreAcquire === "function" &&
    typeof (value as Store).lockAcquire === "function"
  );
}
