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
  /**
   * When a retry is likely to succeed, in ms: the id's typical hold
   * (`holdMs`), or 1000 when none was observed lately, and never later than
   * the nearest lease end (`expiresInMs`). What the HTTP adapters' `Retry-After` starts from.
   */
  readonly retryAfterMs: number;
  /**
   * The id's typical hold time in ms, as the releases of every process on the
   * store recorded it (a moving average of recent holds); `undefined` when
   * none was recorded lately (an id unused for a few hold times forgets it).
   */
  readonly holdMs: number | undefined;
  /**
   * Ms until the nearest lease on the id ends if not renewed (for
   * `"tenant-full"`, the tenant's own): the latest a permit frees up, unless renewed.
   */
  readonly expiresInMs: number;
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

  /** `timing`: the figures `retryAfterMs` was estimated from (by default, none observed, and `retryAfterMs` as the nearest lease end). */
  constructor(
    key: string,
    limit: number,
    retryAfterMs: number,
    reason: NotAcquiredReason = "full",
    tenant?: { name: string; limit: number },
    timing: { holdMs?: number | undefined; expiresInMs: number } = { expiresInMs: retryAfterMs },
  ) {
    const whose =
      reason === "tenant-full" && tenant !== undefined ? ` for tenant "${tenant.name}" (tenantLimit ${tenant.limit})` : "";
    super("ERR_SEMAPHORE_NOT_ACQUIRED", `leasehold: semaphore "${key}" (limit ${limit})${whose} ${REFUSALS[reason]}`);
    this.key = key;
    this.limit = limit;
    this.retryAfterMs = retryAfterMs;
    this.holdMs = timing.holdMs;
    this.expiresInMs = timing.expiresInMs;
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
  /**
   * When a retry is likely to succeed, in ms: the lock's typical hold
   * (`holdMs`), or 1000 when none was observed lately, and never later than
   * the end of the current lease (`expiresInMs`).
   */
  readonly retryAfterMs: number;
  /** The lock's typical hold time in ms, as every process's releases recorded it; `undefined` when none lately. */
  readonly holdMs: number | undefined;
  /** Ms until the lock's current lease ends if not renewed: the latest it frees, unless renewed. */
  readonly expiresInMs: number;
  /** `"full"`: the lock is held; `"queue-full"`: its queue was at `maxQueue`; `"wait-timeout"`: `waitMs` ran out. */
  readonly reason: NotAcquiredReason;

  /** `timing`: as for {@link SemaphoreNotAcquiredError}. */
  constructor(
    key: string,
    retryAfterMs: number,
    reason: NotAcquiredReason = "full",
    timing: { holdMs?: number | undefined; expiresInMs: number } = { expiresInMs: retryAfterMs },
  ) {
    super("ERR_LOCK_NOT_ACQUIRED", `leasehold: lock "${key}" ${LOCK_REFUSALS[reason]}`);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
    this.holdMs = timing.holdMs;
    this.expiresInMs = timing.expiresInMs;
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
 * The Redis user leasehold connects as may not run a command (or touch a key
 * or channel) that leasehold needs: an ACL that is missing a permission. Not
 * transient, so never retried: an acquire rejects with it at once, and a
 * waiter stops waiting with it. `command` names what was refused (e.g.
 * `"zadd"`, or `"keys"` / `"channels"` for a key or channel pattern), and the
 * message gives the `ACL SETUSER` fix; docs/operations.md lists the full ACL.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof StorePermissionError) log.error(`fix the Redis ACL: +${error.command}`);
 * }
 * ```
 */
export class StorePermissionError extends StoreUnavailableError {
  override readonly code = "ERR_STORE_PERMISSION";
  /** The command refused, lower case (`"evalsha"`, `"zadd"`), or `"keys"` / `"channels"` when a key or channel pattern was. */
  readonly command: string;

  constructor(command: string, message: string, cause?: unknown) {
    super(message, cause, "redis");
    this.command = command;
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

/**
 * What `close()` ended. A closed semaphore, lock, store or middleware
 * refuses every call with it at once; a call waiting in a queue when
 * `close()` began is rejected with it (its place in the queue is given up,
 * so no other process waits on it); and the `signal` of a lease held at that
 * moment aborts with it, so the work can stop before its permit is released
 * (at the end of `close`'s `graceMs`). `key` names the id of the lease or
 * wait it ended, when it ended one.
 *
 * @example
 * ```ts
 * await slots.run("openai", async (lease) => {
 *   try {
 *     return await callModel({ signal: lease.signal });
 *   } catch (error) {
 *     if (lease.signal.reason instanceof ShutdownError) return saveForLater();
 *     throw error;
 *   }
 * });
 * ```
 */
export class ShutdownError extends LeaseholdError {
  /** What was closed: `"semaphore"`, `"lock"`, or a store's kind (`"redis"`, `"memory"`). */
  readonly closed: string;
  /** The id whose lease or wait was ended, when one was. */
  readonly key: string | undefined;

  constructor(closed: string, key?: string) {
    super(
      "ERR_SHUTDOWN",
      key === undefined
        ? `leasehold: this ${closed} ${closed === "semaphore" || closed === "lock" ? "" : "store "}is closed (close() was called) and takes no more calls. Make a new one if the process is not shutting down.`
        : `leasehold: the ${closed} holding or awaiting "${key}" is closing: stop the work; a permit still held is released when close()'s graceMs ends.`,
    );
    this.closed = closed;
    this.key = key;
  }
}

/** Both kinds of lease loss, for code that handles either. */
export type LeaseLostError = SemaphoreLeaseLostError | LockLeaseLostError;
