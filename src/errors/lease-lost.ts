import { LeaseholdError } from "./base.js";

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
 * Both kinds of lease loss, for code that handles either.
 *
 * @example
 * ```ts
 * const lost = (error: unknown): error is LeaseLostError =>
 *   error instanceof SemaphoreLeaseLostError || error instanceof LockLeaseLostError;
 * ```
 */
export type LeaseLostError = SemaphoreLeaseLostError | LockLeaseLostError;
