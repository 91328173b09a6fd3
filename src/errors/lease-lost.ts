import { LeaseholdError } from "./base.js";
import { ClientAbortedError, ShutdownError } from "./interruptions.js";

/**
 * Why a lease was lost, as its message words the fix: `"expired"`, it ran out
 * without a renewal reaching the store; `"not-ours"`, the store answered that
 * it was no longer the holder's (an operator's `leasehold release`, another
 * holder's takeover after an eviction or a failover); `"client-gone"`, the
 * HTTP client left and the work went on past `disconnectGraceMs`; `"closed"`,
 * the semaphore or lock closed and the work went on past `close()`'s grace;
 * `"end-unseen"`, an HTTP adapter could not see the handler's end (a middleware
 * between its guard and the handler answered first) and took the permit back
 * after `disconnectGraceMs`.
 * (The constructors spell the union out: the published API names no type for it.)
 */
export type LossReason = NonNullable<ConstructorParameters<typeof LockLeaseLostError>[1]>;

/**
 * The reason of a loss declared with `cause` (the error that says why, if
 * any) by a holder whose lease had `expired` or not by its own clock.
 */
export function lossReason(cause: Error | undefined, expired: boolean): LossReason {
  if (cause instanceof ClientAbortedError) return "client-gone";
  if (cause instanceof ShutdownError) return "closed";
  return expired ? "expired" : "not-ours";
}

/** What the message says after "was lost before the work finished", per reason; `lease` names the lease option. */
function why(reason: LossReason | undefined, lease: "leaseMs" | "ttlMs", kind: "semaphore" | "lock"): string {
  switch (reason) {
    case "expired":
      return `: its lease ran out without a renewal reaching the store. If the work is slow, raise ${lease}; if the store is flaky or the event loop stalls, lower heartbeatMs.`;
    case "not-ours":
      return `: the store answered that it was no longer this holder's (an operator released it, e.g. with leasehold release, or another holder took it over after an eviction or a failover). A longer ${lease} would not have kept it: find out who released it.`;
    case "client-gone":
      return ": the client disconnected and the work went on past disconnectGraceMs, so it was taken back. Stop the work when lease.signal aborts (or end the response).";
    case "end-unseen":
      return ": a middleware between the guard and the handler answered first (this error's cause), so the guard could not see the handler's end and took the permit back after disconnectGraceMs. Wrap the handler (guard.wrap(handler)), or put the guard right before it.";
    case "closed":
      return `: the ${kind} was closed and the work went on past close()'s graceMs, so it was taken back. Stop the work when lease.signal aborts, or give close() a longer graceMs.`;
    default:
      return `. If the work is slow, raise ${lease}; if the store is flaky, lower heartbeatMs.`;
  }
}

/**
 * A semaphore permit was lost while its holder still worked: renewal found it
 * gone, or a whole lease passed without a successful renewal. The pool may
 * have admitted one caller too many; treat it as a capacity incident. The
 * message says why it was lost (ran out without a renewal, released by
 * someone else, its client gone, its semaphore closed) and the fix for that.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof SemaphoreLeaseLostError) logger.error({ key: error.key }, error.message);
 * }
 * ```
 */
export class SemaphoreLeaseLostError extends LeaseholdError {
  /** The id whose permit was lost. */
  readonly key: string;
  /** The limit the permit was taken under. */
  readonly limit: number;

  constructor(key: string, limit: number, reason?: "expired" | "not-ours" | "client-gone" | "closed" | "end-unseen") {
    super(
      "ERR_SEMAPHORE_LEASE_LOST",
      `leasehold: the permit on semaphore "${key}" (limit ${limit}) was lost before the work finished${why(reason, "leaseMs", "semaphore")}`,
    );
    this.key = key;
    this.limit = limit;
  }
}

/**
 * The lock was lost while its holder still worked: two callers may have been
 * inside the critical section at once. Reconcile rather than assume. The
 * message says why it was lost and the fix for that, as the semaphore's does.
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

  constructor(key: string, reason?: "expired" | "not-ours" | "client-gone" | "closed" | "end-unseen") {
    super("ERR_LOCK_LEASE_LOST", `leasehold: the lock "${key}" was lost before the work finished${why(reason, "ttlMs", "lock")}`);
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
