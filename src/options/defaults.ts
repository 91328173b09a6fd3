/**
 * Every default duration leasehold documents or relies on, in one place: the
 * JSDoc `@default` tags and the guides quote these.
 */

/** How long a semaphore lease lasts unless renewed (`leaseMs`). */
export const SEMAPHORE_LEASE_MS = 60_000;
/** How long a lock lease lasts unless renewed (`ttlMs`). */
export const LOCK_TTL_MS = 30_000;
/** The renewal interval of `run` without `heartbeatMs`: this share of the lease (at least 1 ms). */
export const HEARTBEAT_SHARE = 1 / 4;
/** The pause between the attempts of `retries` (`retryDelayMs`). */
export const RETRY_DELAY_MS = 100;
/** When nobody has observed a hold on the id lately, a refusal's `retryAfterMs`: a second rather than a whole lease. */
export const RETRY_AFTER_DEFAULT_MS = 1000;
/** The bound on one store round trip (`redisStore(client, { timeoutMs })`). */
export const STORE_TIMEOUT_MS = 2000;
/** While a store is down: how long the first probe waits after the failure; each failed probe doubles it, up to the next. */
export const FIRST_PROBE_MS = 250;
/** While a store is down: the longest between two probes. */
export const MOST_PROBE_MS = 2000;
/** How long a promised or factory-made `client` may take to appear. */
export const CLIENT_RESOLVE_TIMEOUT_MS = 2000;
/** How long a waiter stays queued without refreshing (`waiterLeaseMs`); a grant to it is reserved as long. */
export const WAITER_LEASE_MS = 5000;
/** How long running work may finish after `close()` before its lease is released (`graceMs`). */
export const CLOSE_GRACE_MS = 5000;
/** How long an adapter keeps a permit after the client left, for the handler to stop (`disconnectGraceMs`). */
export const DISCONNECT_GRACE_MS = 5000;
