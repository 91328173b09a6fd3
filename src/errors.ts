/**
 * Every error leasehold throws. Catch this to handle them all; check `code`
 * (stable across versions) rather than the message.
 *
 * @example
 * ```ts
 * try { await slots.run("openai", work); }
 * catch (error) { if (error instanceof LeaseholdError) log.warn(error.code); throw error; }
 * ```
 */
export class LeaseholdError extends Error {
  /** A stable, machine-readable name for the failure, e.g. `"ERR_LOCK_NOT_ACQUIRED"`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * Bad input: an option, an id or a call argument that cannot work. Thrown
 * before any slot is taken, so nothing needs cleaning up. `option` names what
 * to change.
 *
 * @example
 * ```ts
 * semaphore({ limit: 0 }); // ValidationError: `limit` must be a positive integer, got 0. ...
 * ```
 */
export class ValidationError extends LeaseholdError {
  /** The option or argument at fault, e.g. `"limit"` or `"heartbeatMs"`. */
  readonly option: string;

  constructor(option: string, message: string) {
    super("ERR_LEASEHOLD_VALIDATION", `leasehold: ${message}`);
    this.option = option;
  }
}

/**
 * Why an acquire came back empty-handed: every permit of the id taken
 * (`"full"`), the caller's tenant at its `tenantLimit` (`"tenant-full"`,
 * semaphores with tenants only; when both hold, this one: the tenant's own cap
 * is what it can act on), the queue at `maxQueue` or `tenantMaxQueue`
 * (`"queue-full"`), or `waitMs` spent (`"wait-timeout"`).
 */
export type NotAcquiredReason = "full" | "tenant-full" | "queue-full" | "wait-timeout";

const REFUSALS: Record<NotAcquiredReason, string> = {
  full: "is full. Shed the call, pass waitMs to queue fairly for a permit, or retries to spin.",
  "tenant-full":
    "has no permit left for this tenant. Shed the call, pass waitMs to wait for the tenant's turn, or raise tenantLimit.",
  "queue-full": "is full and its queue is at maxQueue. Shed the call, or raise maxQueue if the wait is worth it.",
  "wait-timeout": "had no permit free within waitMs. Shed the call, or raise waitMs or the limit.",
};

const LOCK_REFUSALS: Record<NotAcquiredReason, string> = {
  full: "is held by another caller. Back off, pass waitMs to queue fairly for it, or retries to spin.",
  // Locks take no tenant: never given.
  "tenant-full": "is held by another caller.",
  "queue-full": "is held and its queue is at maxQueue. Back off, or raise maxQueue.",
  "wait-timeout": "stayed held for all of waitMs. Back off, or raise waitMs.",
};

/**
 * Every permit of a semaphore was taken (after any retries). `run` throws it;
 * `acquire` resolves `null` instead.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof SemaphoreNotAcquiredError) return reply.status(503).send(`${error.key} is busy`);
 * }
 * ```
 */
export class SemaphoreNotAcquiredError extends LeaseholdError {
  /** The id that was full, as passed to `run`. */
  readonly key: string;
  /** The limit the attempt was made against. */
  readonly limit: number;
  /** When a permit is next expected to free up, in ms; an upper bound taken from the nearest lease expiry. */
  readonly retryAfterMs: number;
  /**
   * `"full"`: every permit taken; `"tenant-full"`: the caller's tenant holds its
   * `tenantLimit`; `"queue-full"`: the queue (or the tenant's share of it) was
   * full; `"wait-timeout"`: `waitMs` ran out.
   */
  readonly reason: NotAcquiredReason;
  /** The caller's tenant, when it passed one. */
  readonly tenant: string | undefined;
  /** Its tenant's cap, when it passed a tenant. */
  readonly tenantLimit: number | undefined;

  constructor(
    key: string,
    limit: number,
    retryAfterMs: number,
    reason: NotAcquiredReason = "full",
    tenant?: { name: string; limit: number },
  ) {
    const whose =
      reason === "tenant-full" && tenant !== undefined ? ` for tenant "${tenant.name}" (tenantLimit ${tenant.limit})` : "";
    super("ERR_SEMAPHORE_NOT_ACQUIRED", `leasehold: semaphore "${key}" (limit ${limit})${whose} ${REFUSALS[reason]}`);
    this.key = key;
    this.limit = limit;
    this.retryAfterMs = retryAfterMs;
    this.reason = reason;
    this.tenant = tenant?.name;
    this.tenantLimit = tenant?.limit;
  }
}

/**
 * A semaphore permit was lost while its holder still worked: renewal found it
 * gone, or a whole lease passed without a successful renewal. The pool may
 * have admitted one caller too many; treat it as a capacity incident.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof SemaphoreLeaseLostError) logger.error({ key: error.key }, "over the limit; raise leaseMs");
 * }
 * ```
 */
export class SemaphoreLeaseLostError extends LeaseholdError {
  /** The id whose permit was lost. */
  readonly key: string;
  /** The limit the permit was taken under. */
  readonly limit: number;

  constructor(key: string, limit: number) {
    super(
      "ERR_SEMAPHORE_LEASE_LOST",
      `leasehold: the permit on semaphore "${key}" (limit ${limit}) was lost before the work finished. If the work is slow, raise leaseMs; if the store is flaky, lower heartbeatMs.`,
    );
    this.key = key;
    this.limit = limit;
  }
}

/**
 * The lock was held by someone else (after any retries). `run` throws it;
 * `acquire` resolves `null` instead.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof LockNotAcquiredError) return new Response("Already processing", { status: 409 });
 * }
 * ```
 */
export class LockNotAcquiredError extends LeaseholdError {
  /** The id that was held, as passed to `run`. */
  readonly key: string;
  /** When the lock's current lease ends at the latest, in ms. */
  readonly retryAfterMs: number;
  /** `"full"`: the lock is held; `"queue-full"`: its queue was at `maxQueue`; `"wait-timeout"`: `waitMs` ran out. */
  readonly reason: NotAcquiredReason;

  constructor(key: string, retryAfterMs: number, reason: NotAcquiredReason = "full") {
    super("ERR_LOCK_NOT_ACQUIRED", `leasehold: lock "${key}" ${LOCK_REFUSALS[reason]}`);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
    this.reason = reason;
  }
}

/**
 * The lock was lost while its holder still worked: two callers may have been
 * inside the critical section at once. Reconcile rather than assume.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof LockLeaseLostError) return reconcile(error.key);
 * }
 * ```
 */
export class LockLeaseLostError extends LeaseholdError {
  /** The id whose lock was lost. */
  readonly key: string;

  constructor(key: string) {
    super(
      "ERR_LOCK_LEASE_LOST",
      `leasehold: the lock "${key}" was lost before the work finished. If the work is slow, raise ttlMs; if the store is flaky, lower heartbeatMs.`,
    );
    this.key = key;
  }
}

/**
 * The store could not be reached or answered nonsense within its bound (the
 * store's `timeoutMs`, as in `redisStore(client, { timeoutMs })`). No slot is
 * assumed held: an acquire whose outcome is unknown is released in the
 * background. `cause` holds the underlying error.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof StoreUnavailableError) return reply.status(503).send("limiter unavailable");
 * }
 * ```
 */
export class StoreUnavailableError extends LeaseholdError {
  /** The kind of store that failed (`"redis"`, `"memory"`, or a custom store's kind), when known. */
  readonly store: string | undefined;
  /**
   * Set when the call was refused at once because the store is known to be
   * unreachable: ms until leasehold probes it again (what an HTTP adapter
   * answers as `Retry-After`).
   */
  retryAfterMs: number | undefined;
  /** True when the store did not answer at all (a timeout), as opposed to answering with an error. */
  unreachable = false;

  constructor(message: string, cause?: unknown, store?: string) {
    super("ERR_STORE_UNAVAILABLE", `leasehold: ${message}`, { cause });
    this.store = store;
  }
}

/**
 * The HTTP client went away before its response finished. An adapter aborts
 * the handler's `lease.signal` with it, so the work can stop; the permit is
 * returned once the work has ended, at the latest `disconnectGraceMs` later
 * (which is then reported as a loss).
 *
 * @example
 * ```ts
 * app.get("/report", semaphore("reports", 4), async (req, res) => {
 *   req.lease?.signal.addEventListener("abort", () => {
 *     if (req.lease?.signal.reason instanceof ClientAbortedError) log.info("client left");
 *     res.end(); // Express: the permit returns when the response is ended
 *   });
 * });
 * ```
 */
export class ClientAbortedError extends LeaseholdError {
  /** The lease id of the request. */
  readonly key: string;

  constructor(key: string) {
    super(
      "ERR_CLIENT_ABORTED",
      `leasehold: the client disconnected before the response for "${key}" finished; stop the work: its permit returns when the work ends.`,
    );
    this.key = key;
  }
}

/** Both kinds of lease loss, for code that handles either. */
export type LeaseLostError = SemaphoreLeaseLostError | LockLeaseLostError;
