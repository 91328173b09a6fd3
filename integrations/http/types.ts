import type { LeaseLostError, NotAcquiredReason, StoreUnavailableError } from "../../src/errors/index.js";
import type { LockLease, SemaphoreLease } from "../../src/lease/types.js";
import type { CloseOptions } from "../../src/options/types.js";
import type { ClientInput } from "../../src/store/access/types.js";

/**
 * Options every adapter takes, for semaphores and locks alike. `Req` is the
 * framework's request (or context); `OnRejected` is the adapter's own
 * refusal hook.
 */
export interface AdmissionOptions<Req, OnRejected = never> {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store (`redisStore(redis, { timeoutMs })`, `memoryStore()`).
   * @default the process-wide embedded memory store (NestJS: the module's client)
   */
  client?: ClientInput;
  /** Key namespace of the engine primitive. @default "semaphore" / "lock" */
  prefix?: string;
  /**
   * Derives the per-request part of the lease id: the id becomes
   * `<name>:<key(request)>`. Must return a non-empty string; anything else is
   * a `ValidationError` on the framework's error path, never a shared key.
   * Requests that have no key (a missing header) should be skipped with
   * `skip`, or refused before this middleware.
   */
  key?: (request: Req) => string;
  /** Requests for which this returns true pass through without a lease. */
  skip?: (request: Req) => boolean | PromiseLike<boolean>;
  /**
   * Status of a refusal (full semaphore / held lock).
   * @default 503 for a semaphore, 409 for a lock
   */
  status?: number;
  /**
   * Retry-After in seconds: a number, or a function of the refusal (which
   * carries leasehold's own estimate as `retryAfter`).
   * @default an estimate from the hold times this process observed, capped by the nearest lease expiry
   */
  retryAfter?: number | ((refusal: RejectionContext) => number);
  /**
   * Your own answer to a refusal instead of the problem+json one: Express
   * `(req, res, rejection, next)`, Hono `(c, rejection) => Response`, NestJS
   * `(rejection, request) => Error` (thrown).
   * @default the problem+json response
   */
  onRejected?: OnRejected;
  /**
   * What to do when the store cannot be reached: `"fail-closed"` refuses
   * with 503; `"fail-open"` lets the request through without a lease.
   * @default "fail-closed"
   */
  onStoreError?: "fail-closed" | "fail-open";
  /** Sees every store failure met while admitting, in both modes. */
  onStoreUnavailable?: (error: StoreUnavailableError, request: Req) => void;
  /**
   * Sees a lease lost while its request was in flight, including a permit
   * taken back `disconnectGraceMs` after a disconnect from a handler still at work.
   */
  onLeaseLost?: (error: LeaseLostError, request: Req) => void;
  /**
   * After the client disconnects, how long the handler may work on before
   * its permit is taken back anyway (reported as a loss: the `lost` event and
   * `onLeaseLost`). The permit returns sooner when the work ends: the handler
   * settles (Hono, NestJS) or ends the response (Express), or releases the lease.
   * @default 5000
   */
  disconnectGraceMs?: number;
  /**
   * Wait up to this long in the id's fair FIFO queue instead of being refused
   * at once. A client that disconnects while waiting leaves the queue.
   * @default 0 (fail fast)
   */
  waitMs?: number;
  /** The most requests waiting on one id; one more is refused at once. @default unbounded */
  maxQueue?: number;
  /** Further attempts when full (a bounded spin; prefer `waitMs`). @default 0 */
  retries?: number;
  /** Pause between attempts, in ms. @default 100 */
  retryDelayMs?: number;
  /** Renewal interval while the response is in flight. @default a quarter of the lease */
  heartbeatMs?: number | false;
  /** Sees each failed renewal round trip (not a loss). */
  onRenewError?: (error: unknown) => void;
  /**
   * Send the lease's fencing token as a `Lease-Fence` response header, so
   * the client (or a proxy, or your logs) can see which grant served it.
   * Set before the handler runs; absent when the request holds no lease.
   * @default false
   */
  exposeFence?: boolean;
}

/**
 * What an app-wide registration (NestJS's `LeaseholdModule.forRoot`, Fastify's
 * `leasehold` plugin) takes: the client, defaults for every route it guards,
 * and how long requests in flight may finish when the app closes.
 *
 * @example
 * ```ts
 * const shared: SharedAdmissionOptions<unknown> = { client: redis, onStoreError: "fail-open", shutdownGraceMs: 10_000 };
 * ```
 */
export interface SharedAdmissionOptions<Req, OnRejected = never>
  extends Pick<
    AdmissionOptions<Req, OnRejected>,
    "prefix" | "onStoreError" | "onStoreUnavailable" | "onLeaseLost" | "onRenewError" | "disconnectGraceMs" | "exposeFence"
  > {
  /** Where leases live. @default the process-wide embedded memory store */
  client?: ClientInput;
  /**
   * When the application closes (NestJS: `app.close()`, or a signal with
   * `app.enableShutdownHooks()`; Fastify: `app.close()`), how long requests
   * in flight may work on after their lease's signal aborted with a
   * `ShutdownError`; permits still held then are released (the request
   * answered 503 `shutting-down`, or cut if its response had started). See
   * docs/operations.md, Shutting down.
   * @default 5000
   */
  shutdownGraceMs?: number;
}

/** Adapter options of a semaphore. */
export interface SemaphoreAdmissionOptions<Req, OnRejected = never> extends AdmissionOptions<Req, OnRejected> {
  /** How long a permit lasts without renewal, in ms. @default 60000 */
  leaseMs?: number;
  /** Permits one request takes: a number or a function of the request. @default 1 */
  weight?: number | ((request: Req) => number);
  /**
   * Who the request is for, when tenants share the id's permits: its lease
   * counts against the limit and against its tenant's `tenantLimit`, and
   * queued requests are served tenant by tenant. Returns a non-empty string,
   * or `undefined` when the request names no tenant: that request is answered
   * 400 `tenant-missing` with nothing taken (counting it under no tenant would
   * let it escape every cap; `skip` it to let it through unlimited). Anything
   * else is a `ValidationError` on the framework's error path. Needs
   * `tenantLimit`.
   *
   * @example
   * ```ts
   * semaphore("openai", 20, { tenant: (req) => req.get("x-tenant-id"), tenantLimit: 5 });
   * ```
   */
  tenant?: (request: Req) => string | undefined;
  /**
   * The most permits one tenant may hold at once (weights count): a number,
   * or a function of the tenant (premium tenants get more). At most the
   * limit. A tenant at its cap is refused with 429 `tenant-full` while the
   * others are still admitted.
   */
  tenantLimit?: number | ((tenant: string) => number);
  /** The most requests of one tenant waiting on the id (with `waitMs`); one more is refused at once. @default unbounded */
  tenantMaxQueue?: number;
}

/** Adapter options of a lock. */
export interface LockAdmissionOptions<Req, OnRejected = never> extends AdmissionOptions<Req, OnRejected> {
  /** How long the lock lasts without renewal, in ms. @default 30000 */
  ttlMs?: number;
}

/** What an adapter was given for one route: `semaphore(name, limit, options)` or `lock(name, options)`. */
export type AdmissionRoute<Req, OnRejected> =
  | {
      kind: "semaphore";
      name: string;
      limit: number | ((request: Req) => number);
      options?: SemaphoreAdmissionOptions<Req, OnRejected> | undefined;
    }
  | { kind: "lock"; name: string; options?: LockAdmissionOptions<Req, OnRejected> | undefined };

/**
 * The lease a handler sees: its `signal` also aborts (with `ClientAbortedError`) when the client disconnects.
 *
 * @example
 * ```ts
 * function stopWith(lease: RequestLease | undefined): AbortSignal | undefined {
 *   return lease?.signal;
 * }
 * ```
 */
export type RequestLease = SemaphoreLease | LockLease;

/**
 * What can be closed for a clean shutdown: the adapters' middleware.
 *
 * @example
 * ```ts
 * const closing: Closable[] = [];
 * process.once("SIGTERM", () => void Promise.all(closing.map((limiter) => limiter.close({ graceMs: 10_000 }))));
 * ```
 */
export interface Closable {
  /**
   * Stops admitting (later requests, and those waiting, are answered 503
   * `shutting-down`), aborts the signal of every request in flight with a
   * `ShutdownError`, and resolves once their permits are back: when their
   * work ends, at the latest when `graceMs` ends. A second call returns the
   * same promise.
   */
  close(options?: CloseOptions): Promise<void>;
}

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
