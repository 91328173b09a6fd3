/** Why a request was not admitted (or lost its admission). */
export type RejectionReason = "semaphore-full" | "lock-held" | "store-unavailable" | "lease-lost";

/**
 * The `application/problem+json` body (RFC 9457) leasehold answers with,
 * plus the lease `key` and `limit`.
 */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The lease id the request asked for, e.g. `"openai:tenant-a"`. */
  key: string;
  /** The limit of that id (1 for a lock). */
  limit: number;
  /** Seconds until a retry is likely to succeed, as in the Retry-After header. */
  retryAfter: number;
  /** For `store-unavailable`: the kind of store that failed. */
  store?: string;
}

/** A refused request: what to answer, in a form every adapter can send or replace. */
export interface Rejection {
  reason: RejectionReason;
  status: number;
  /** Whole seconds, at least 1. */
  retryAfter: number;
  /** `Retry-After` and `Content-Type`. */
  headers: Record<string, string>;
  problem: ProblemDetails;
  /** The engine error behind it (`SemaphoreNotAcquiredError`, `LockNotAcquiredError`, `StoreUnavailableError`, a LeaseLost error). */
  error: Error;
}

const TITLES: Record<RejectionReason, string> = {
  "semaphore-full": "Too many concurrent requests",
  "lock-held": "Resource is locked",
  "store-unavailable": "Concurrency limiter unavailable",
  "lease-lost": "Concurrency permit lost",
};

/**
 * The problem `type` URI of each reason; stable, so clients can branch on it.
 *
 * @example
 * ```ts
 * if (problem.type === PROBLEM_TYPES["semaphore-full"]) await sleep(problem.retryAfter * 1000);
 * ```
 */
export const PROBLEM_TYPES: Record<RejectionReason, string> = {
  "semaphore-full": "urn:leasehold:problem:semaphore-full",
  "lock-held": "urn:leasehold:problem:lock-held",
  "store-unavailable": "urn:leasehold:problem:store-unavailable",
  "lease-lost": "urn:leasehold:problem:lease-lost",
};

export function rejection(
  reason: RejectionReason,
  status: number,
  key: string,
  limit: number,
  retryAfter: number,
  detail: string,
  error: Error,
  store?: string,
): Rejection {
  const problem: ProblemDetails = {
    type: PROBLEM_TYPES[reason],
    title: TITLES[reason],
    status,
    detail,
    key,
    limit,
    retryAfter,
    ...(store === undefined ? {} : { store }),
  };
  return {
    reason,
    status,
    retryAfter,
    headers: { "Retry-After": String(retryAfter), "Content-Type": "application/problem+json" },
    problem,
    error,
  };
}

/**
 * Makes an adapter's refusal exception without capturing a stack trace. A
 * refusal is an answer, not a bug: its stack would only point into the
 * adapter, and capturing one was a large share of what refusing cost.
 */
export function withoutStackTrace<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
