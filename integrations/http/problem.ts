import {
  ClientAbortedError,
  type LeaseLostError,
  LockLeaseLostError,
  type NotAcquiredReason,
  SemaphoreLeaseLostError,
  ShutdownError,
} from "../../src/errors/index.js";
import type { ProblemDetails, ProblemType, Rejection, RejectionContext } from "./types.js";

const TITLES: Record<ProblemType, string> = {
  "semaphore-full": "Too many concurrent requests",
  "tenant-full": "Too many concurrent requests for this tenant",
  "tenant-missing": "The request names no tenant",
  "lock-held": "Resource is locked",
  "store-unavailable": "Concurrency limiter unavailable",
  "lease-lost": "Concurrency permit lost",
  "shutting-down": "Shutting down",
};

/**
 * The problem `type` URI of each {@link ProblemType}; stable, so clients can branch on it.
 *
 * @example
 * ```ts
 * if (problem.type === PROBLEM_TYPES["semaphore-full"]) await sleep(problem.retryAfter * 1000);
 * ```
 */
export const PROBLEM_TYPES: Record<ProblemType, string> = {
  "semaphore-full": "urn:leasehold:problem:semaphore-full",
  "tenant-full": "urn:leasehold:problem:tenant-full",
  "tenant-missing": "urn:leasehold:problem:tenant-missing",
  "lock-held": "urn:leasehold:problem:lock-held",
  "store-unavailable": "urn:leasehold:problem:store-unavailable",
  "lease-lost": "urn:leasehold:problem:lease-lost",
  "shutting-down": "urn:leasehold:problem:shutting-down",
};

/** Everything a rejection is made of: its context, its problem type, the sentence that explains it, and the failed store's kind. */
export interface RejectionParts extends RejectionContext {
  type: ProblemType;
  detail: string;
  store?: string | undefined;
}

/** Builds a rejection, once: its body, headers and fields all from the same parts. */
export function rejection(parts: RejectionParts): Rejection {
  const { type, reason, status, key, limit, retryAfter, detail, error, store } = parts;
  const problem: ProblemDetails = { type: PROBLEM_TYPES[type], title: TITLES[type], status, detail, key, limit, retryAfter };
  // Only its own tenant's name, and only where the refusal is about that tenant.
  if (type === "tenant-full" && parts.tenant !== undefined) problem.tenant = parts.tenant;
  if (store !== undefined) problem.store = store;
  return {
    reason,
    status,
    retryAfter,
    headers: { "Retry-After": String(retryAfter), "Content-Type": "application/problem+json" },
    problem,
    error,
  };
}

/** Why a full semaphore or a held lock refused, for the `detail` sentence. */
function after(reason: NotAcquiredReason): string {
  if (reason === "queue-full") return " and its queue is full";
  if (reason === "wait-timeout") return " and none freed within the wait";
  return "";
}

/** The sentence of a refusal by a full semaphore or a held lock. */
export function refusalDetail(
  kind: "semaphore" | "lock",
  key: string,
  limit: number,
  reason: NotAcquiredReason,
  retryAfter: number,
): string {
  return kind === "semaphore"
    ? `All ${limit} permits of "${key}" are in use${after(reason)}; retry after ${retryAfter} s.`
    : `"${key}" is locked by another request${after(reason)}; retry after ${retryAfter} s.`;
}

/**
 * The sentence of a refusal because the request's tenant holds its cap: its
 * own figures only, never the id's other tenants' or the id's total.
 */
export function tenantFullDetail(key: string, tenant: string, tenantLimit: number, weight: number, retryAfter: number): string {
  const held =
    weight === 1
      ? `All ${tenantLimit} permits of tenant "${tenant}" on "${key}" are in use`
      : `Tenant "${tenant}" has fewer than ${weight} of its ${tenantLimit} permits on "${key}" free`;
  return `${held}; retry after ${retryAfter} s.`;
}

/**
 * The answer to a request whose route shares permits by tenant when its
 * `tenant` function found none (a missing header, say): 400, nothing taken.
 * Counting it under no tenant would let it escape every tenant's cap.
 */
export function tenantMissingRejection(error: Error, key: string, limit: number): Rejection {
  const built = rejection({
    type: "tenant-missing",
    reason: "tenant-missing",
    status: 400,
    key,
    limit,
    retryAfter: 0,
    detail: `The request names no tenant, and "${key}" shares its permits by tenant; send the tenant, or skip such requests with skip().`,
    error,
  });
  // Retrying the same request will not help: no Retry-After.
  built.headers = { "Content-Type": "application/problem+json" };
  return built;
}

/** The sentence of a refusal because the store could not be reached. */
export function storeDownDetail(store: string, key: string): string {
  return `The ${store} store behind "${key}" could not be reached, so the request was refused rather than admitted without a limit.`;
}

/**
 * The answer to a request the middleware will not admit because it is
 * closing (`close()`, a NestJS app shutting down): 503, so that a load
 * balancer or client retries elsewhere.
 */
export function shuttingDownRejection(error: Error, key: string, limit: number): Rejection {
  return rejection({
    type: "shutting-down",
    reason: "shutting-down",
    status: 503,
    key,
    limit,
    retryAfter: 1,
    detail: `This server is shutting down and admits no more requests to "${key}"; retry, another instance will answer.`,
    error,
  });
}

/**
 * The answer to a request whose lease was lost before its response started;
 * taken back at the end of a shutdown's grace, it is answered as shutting down.
 */
export function leaseLostRejection(error: LeaseLostError, key: string, limit: number): Rejection {
  if (error.cause instanceof ShutdownError) return shuttingDownRejection(error, key, limit);
  return rejection({
    type: "lease-lost",
    reason: "lease-lost",
    status: 503,
    key,
    limit,
    retryAfter: 1,
    detail: `The permit on "${key}" was lost before the response started, so the request was stopped rather than run over the limit.`,
    error,
  });
}

/** One of the reasons leasehold aborts a request's `lease.signal` with. */
type AbortReason = ShutdownError | LeaseLostError | ClientAbortedError;

function isAbortReason(error: unknown): error is AbortReason {
  return (
    error instanceof ShutdownError ||
    error instanceof SemaphoreLeaseLostError ||
    error instanceof LockLeaseLostError ||
    error instanceof ClientAbortedError
  );
}

/**
 * The leasehold abort reason `error` is or carries as the `cause` of an `AbortError` made from
 * `lease.signal`; `undefined` for any other error. True-ish exactly when {@link abortRejection}
 * has an answer (or `null`) for it.
 */
export function abortReasonOf(error: unknown): AbortReason | undefined {
  if (isAbortReason(error)) return error;
  if (error instanceof Error && error.name === "AbortError" && isAbortReason(error.cause)) return error.cause;
  return undefined;
}

/**
 * The answer to a request whose handler failed with one of leasehold's own abort reasons: what a
 * handler that passes `lease.signal` to its work and lets the rejection propagate (as the docs
 * recommend) fails with. The reason itself is recognised, and as the `cause` of an `AbortError` made
 * from the signal (Node's `timers/promises`, `events.once`, streams). 503 `shutting-down` for a
 * `ShutdownError`; for a lost lease, as {@link leaseLostRejection}; `null` for a `ClientAbortedError`,
 * which needs no answer (nobody is left to read it); `undefined` for any other error, which stays the
 * framework's to answer and log.
 */
export function abortRejection(error: unknown, key: string, limit: number): Rejection | null | undefined {
  const reason = abortReasonOf(error);
  if (reason === undefined) return undefined;
  if (reason instanceof ClientAbortedError) return null;
  if (reason instanceof ShutdownError) return shuttingDownRejection(reason, key, limit);
  return leaseLostRejection(reason, key, limit);
}
