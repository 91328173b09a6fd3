/**
 * Options shared by `acquire` and `run` of both primitives: a bounded spin when full.
 *
 * @example
 * ```ts
 * const lease = await slots.acquire("openai", { retries: 3, retryDelayMs: 50 });
 * ```
 */
export interface RetryOptions {
  /**
   * Further attempts when no permit is free. 0 fails fast.
   * @default 0
   */
  retries?: number;
  /**
   * Delay between attempts, in ms.
   * @default 100
   */
  retryDelayMs?: number;
}

/**
 * Options of the waiting mode: a fair FIFO queue instead of failing fast or spinning.
 *
 * @example
 * ```ts
 * const text = await slots.run("openai", (lease) => callModel(prompt, { signal: lease.signal }), { waitMs: 2_000, maxQueue: 100 });
 * ```
 */
export interface WaitOptions {
  /**
   * The longest a caller waits in the id's queue for a permit, in ms. 0 fails
   * fast. Waiters are admitted in arrival order across every process, woken
   * by notification. Cannot be combined with `retries`.
   * @default 0
   */
  waitMs?: number;
  /**
   * The most callers waiting on one id; one more is refused at once. Bounds
   * the memory and sockets that waiting holds.
   * @default unbounded
   */
  maxQueue?: number;
}

/**
 * Options of one `acquire` or `run` call.
 *
 * @example
 * ```ts
 * const lease = await slots.acquire("openai", { waitMs: 5_000, signal: AbortSignal.timeout(1_000) });
 * ```
 */
export interface CallOptions {
  /**
   * Cancels the call while it has not got its lease (during retries): it
   * rejects with `signal.reason`, and a permit that arrives after the abort
   * is given straight back. Once held, the lease is unaffected.
   */
  signal?: AbortSignal;
}

/**
 * Who takes a lease: a factory's default for its calls, or one call's own.
 *
 * @example
 * ```ts
 * const jobs = lock(redis, { owner: "nightly-billing" });
 * await jobs.run("invoices", (lease) => work(lease), { owner: "nightly-billing:run-42" });
 * ```
 */
export interface OwnerOptions {
  /**
   * Who holds the lease, as `holders(id)`, `holder(id)` and `leasehold
   * inspect` report it: a request id, a job name, a worker. Printable, at
   * most `MAX_OWNER_LENGTH` (128) characters. It travels inside the lease
   * token, so recording it costs no store command.
   * @default `<hostname>:<pid>`
   */
  owner?: string;
}

/**
 * Options of `run` only: how the lease is kept while the body works.
 *
 * @example
 * ```ts
 * await locks.run("report", (lease) => build({ signal: lease.signal }), {
 *   heartbeatMs: 5_000,
 *   onRenewError: (error) => log.warn({ error }, "renewal failed; retrying"),
 * });
 * ```
 */
export interface KeepingOptions {
  /**
   * Renewal interval while the body runs, in ms. Must be at most half the
   * lease when given. `false` turns renewal off (a body that outlives its
   * lease is still reported lost).
   * @default max(1, floor(lease / 4))
   */
  heartbeatMs?: number | false;
  /**
   * Sees each failed renewal (or final release) round trip. A failed round
   * trip is not a loss: the next tick retries. Without it they are swallowed.
   */
  onRenewError?: (error: unknown) => void;
}

/** The tenant options a semaphore call may pass. */
export interface TenantCallOptions {
  /**
   * Who the call is for, when several tenants share the id's permits: its
   * lease counts against the id's `limit` and against its tenant's
   * `tenantLimit`, and when callers queue, tenants are served in turn.
   */
  tenant?: string;
  /**
   * The most permits this call's tenant may hold at once (weights count), at
   * most the id's limit: a positive integer, or a function of the tenant
   * that returns one (checked at each call, before any permit is taken).
   * Overrides the semaphore's `tenantLimit`.
   *
   * @example
   * ```ts
   * await slots.run("openai", work, { tenant: "acme", tenantLimit: (tenant) => (premium.has(tenant) ? 8 : 2) });
   * ```
   */
  tenantLimit?: number | ((tenant: string) => number);
  /** The most callers of this tenant waiting on the id; one more is refused at once. @default unbounded */
  tenantMaxQueue?: number;
}

/** The tenant defaults a semaphore takes. */
export interface TenantFactoryOptions {
  /**
   * The most permits one tenant may hold at once: a number, or a function of
   * the tenant (premium tenants get more). At most the id's limit. Required
   * (here or per call) for any call that passes a `tenant`.
   */
  tenantLimit?: number | ((tenant: string) => number);
  /** The most callers of one tenant waiting on one id. @default unbounded */
  tenantMaxQueue?: number;
}

/**
 * Options of `close()` on a semaphore, a lock or an adapter's middleware.
 *
 * @example
 * ```ts
 * process.once("SIGTERM", () => void slots.close({ graceMs: 10_000 }));
 * ```
 */
export interface CloseOptions {
  /**
   * How long work that holds a lease may go on after its `signal` aborted
   * with a `ShutdownError`. A lease still held when it ends is released
   * anyway, and reported as lost (the `lost` event, `run` rejecting with the
   * LeaseLost error whose `cause` is the `ShutdownError`). 0 releases at once.
   * @default 5000
   */
  graceMs?: number;
}
