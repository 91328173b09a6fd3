import { type LeaseLostError, type NotAcquiredReason, ShutdownError } from "../../src/errors/index.js";

/**
 * Why a request was not admitted (or lost its admission): the engine's own
 * reasons (`NotAcquiredReason`: `"full"` for a full semaphore or a held lock,
 * `"tenant-full"`, `"queue-full"`, `"wait-timeout"`), and the adapter's
 * (`"tenant-missing"`, `"store-unavailable"`, `"lease-lost"`,
 * `"shutting-down"`). The problem `type` URI a client sees is coarser: see
 * {@link ProblemType}.
 *
 * @example
 * ```ts
 * const onRejected: ExpressOnRejected = (_req, res, rejection) => {
 *   res.status(rejection.reason === "store-unavailable" ? 503 : 429).set(rejection.headers).json(rejection.problem);
 * };
 * ```
 */
export type RejectionReason = NotAcquiredReason | "tenant-missing" | "store-unavailable" | "lease-lost" | "shutting-down";

/**
 * The kinds of problem a refusal is answered with, each with a stable `type`
 * URI ({@link PROBLEM_TYPES}): `semaphore-full` for a semaphore refused as
 * full, with its queue full or after waiting (reasons `full`, `queue-full`,
 * `wait-timeout`), `lock-held` for a lock refused likewise; the others are
 * named as their reason.
 *
 * @example
 * ```ts
 * const busy: ProblemType[] = ["semaphore-full", "tenant-full", "lock-held"];
 * ```
 */
export type ProblemType =
  | "semaphore-full"
  | "tenant-full"
  | "tenant-missing"
  | "lock-held"
  | "store-unavailable"
  | "lease-lost"
  | "shutting-down";

/**
 * The `application/problem+json` body (RFC 9457) leasehold answers with,
 * plus the lease `key` and `limit`.
 *
 * @example
 * ```ts
 * const problem = (await response.json()) as ProblemDetails;
 * if (problem.type === PROBLEM_TYPES["semaphore-full"]) await sleep(problem.retryAfter * 1000);
 * ```
 */
export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The lease id the request asked for, e.g. `"openai:tenant-a"`. */
  key: string;
  /**
   * The limit the request met: that id's (1 for a lock), or for
   * `tenant-full` its tenant's `tenantLimit`. A tenant never sees the
   * figures of the id's other tenants.
   */
  limit: number;
  /** Seconds until a retry is likely to succeed, as in the Retry-After header. */
  retryAfter: number;
  /** For `tenant-full`: the request's own tenant. */
  tenant?: string;
  /** For `store-unavailable`: the kind of store that failed. */
  store?: string;
}

/**
 * What a refusal is about, before it is written as a response: what a
 * `retryAfter` function is given, with leasehold's own estimate as
 * `retryAfter`.
 *
 * @example
 * ```ts
 * semaphore("openai", 20, { retryAfter: (refusal) => (refusal.reason === "full" ? refusal.retryAfter : 30) });
 * ```
 */
export interface RejectionContext {
  reason: RejectionReason;
  status: number;
  /** The lease id the request asked for. */
  key: string;
  /** The limit the request met: that id's (1 for a lock), or for `tenant-full` its tenant's `tenantLimit`. */
  limit: number;
  /** Whole seconds until a retry is likely to succeed, at least 1. */
  retryAfter: number;
  /** The request's tenant, when its route names one (`tenant` option). */
  tenant?: string | undefined;
  /** The engine error behind it (`SemaphoreNotAcquiredError`, `LockNotAcquiredError`, `StoreUnavailableError`, a LeaseLost error). */
  error: Error;
}

/**
 * A refused request: what to answer, in a form every adapter can send or
 * replace (`onRejected`).
 *
 * @example
 * ```ts
 * import { semaphore } from "leasehold/express";
 * semaphore("openai", 20, {
 *   onRejected: (_req, res, rejection) => void res.status(429).set(rejection.headers).json({ busy: rejection.problem.key }),
 * });
 * ```
 */
export interface Rejection {
  reason: RejectionReason;
  status: number;
  /** Whole seconds, at least 1; 0 for `tenant-missing`, which a retry does not cure. */
  retryAfter: number;
  /** `Retry-After` (not for `tenant-missing`) and `Content-Type`. */
  headers: Record<string, string>;
  problem: ProblemDetails;
  /** The engine error behind it (`SemaphoreNotAcquiredError`, `LockNotAcquiredError`, `StoreUnavailableError`, a LeaseLost error). */
  error: Error;
}

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
