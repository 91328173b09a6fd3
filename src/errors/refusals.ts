import { LeaseholdError } from "./base.js";

/**
 * Why an acquire came back empty-handed: every permit of the id taken
 * (`"full"`), the caller's tenant at its `tenantLimit` (`"tenant-full"`,
 * semaphores with tenants only; when both hold, this one: the tenant's own cap
 * is what it can act on), the queue at `maxQueue` or `tenantMaxQueue`
 * (`"queue-full"`), or `waitMs` spent (`"wait-timeout"`).
 *
 * @example
 * ```ts
 * const status = (reason: NotAcquiredReason): number => (reason === "tenant-full" ? 429 : 503);
 * ```
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
