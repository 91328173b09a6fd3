import type { ClientInput } from "../client.js";
import { DISCONNECT_GRACE_MS } from "../defaults.js";
import { type LeaseLostError, type StoreUnavailableError, ValidationError } from "../errors.js";
import type { LockOptions } from "../lock.js";
import type { SemaphoreOptions } from "../semaphore.js";
import {
  id as checkId,
  integerAtLeast,
  knownOptions,
  optionalBoolean,
  optionalFunction,
  optionsObject,
  positiveMs,
} from "../validate.js";
import type { RejectionContext } from "./problem.js";

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

/** The engine primitive an admission runs on, with its validated-at-creation options. */
export type EngineConfig = { kind: "semaphore"; options: SemaphoreOptions } | { kind: "lock"; options: LockOptions };

/** A route's options, checked and resolved once, when the middleware (or decorator) is created. */
export interface AdmissionConfig<Req, OnRejected> {
  readonly kind: "semaphore" | "lock";
  readonly name: string;
  readonly limit: number | ((request: Req) => number);
  readonly weight: number | ((request: Req) => number);
  readonly key: ((request: Req) => string) | undefined;
  readonly skip: ((request: Req) => boolean | PromiseLike<boolean>) | undefined;
  readonly status: number;
  /** Status of a refusal because the request's tenant is at its cap: `status` when given, else 429. */
  readonly tenantStatus: number;
  /** Who a request is for, and its cap (semaphores only; both or neither). */
  readonly tenant: ((request: Req) => string | undefined) | undefined;
  readonly tenantLimit: number | ((tenant: string) => number) | undefined;
  readonly tenantMaxQueue: number | undefined;
  /** Send `Lease-Fence` on admitted responses. */
  readonly exposeFence: boolean;
  readonly retryAfter: number | ((refusal: RejectionContext) => number) | undefined;
  readonly onRejected: OnRejected | undefined;
  readonly failOpen: boolean;
  readonly onStoreUnavailable: ((error: StoreUnavailableError, request: Req) => void) | undefined;
  readonly onLeaseLost: ((error: LeaseLostError, request: Req) => void) | undefined;
  readonly disconnectGraceMs: number;
  /** The route queues (`waitMs` above 0): its observed waits feed Retry-After. */
  readonly queues: boolean;
  /** The route may wait (queue or spin), so each call carries the client's signal. */
  readonly mayWait: boolean;
  readonly engine: EngineConfig;
}

/** How long a handler may work on after its client left, by default. */

/** Options passed through to the engine primitive as they are; it validates them itself, at creation. */
const ENGINE_OPTIONS = [
  "client",
  "prefix",
  "retries",
  "retryDelayMs",
  "waitMs",
  "maxQueue",
  "heartbeatMs",
  "onRenewError",
] as const satisfies readonly (keyof AdmissionOptions<unknown>)[];

const ADAPTER_OPTIONS = [
  ...ENGINE_OPTIONS,
  "key",
  "skip",
  "status",
  "retryAfter",
  "onRejected",
  "onStoreError",
  "onStoreUnavailable",
  "onLeaseLost",
  "disconnectGraceMs",
  "exposeFence",
] as const satisfies readonly (keyof AdmissionOptions<unknown>)[];

const SEMAPHORE_OPTIONS = [...ADAPTER_OPTIONS, "leaseMs", "weight", "tenant", "tenantLimit", "tenantMaxQueue"] as const;
const LOCK_OPTIONS = [...ADAPTER_OPTIONS, "ttlMs"] as const;

/** The given values of `names`, leaving out those not given (an `undefined` is not passed on as a value). */
export function given<T extends object, K extends keyof T>(options: T, names: readonly K[]): Partial<Pick<T, K>> {
  const picked: Partial<Pick<T, K>> = {};
  for (const name of names) {
    const value = options[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
}

function unprefixed(error: unknown): string {
  return (error as Error).message.replace(/^leasehold: /, "");
}

function checkName(name: unknown): string {
  if (typeof name === "string" && name.length > 0) {
    try {
      return checkId(name);
    } catch (error) {
      throw new ValidationError("name", `the lease name is not usable: ${unprefixed(error)}`);
    }
  }
  throw new ValidationError(
    "name",
    `the lease name must be a non-empty string naming what is limited (e.g. "openai"), got ${typeof name === "string" ? '""' : String(name)}.`,
  );
}

function checkStatus(value: number | undefined, kind: "semaphore" | "lock"): number {
  if (value === undefined) return kind === "semaphore" ? 503 : 409;
  if (typeof value === "number" && Number.isInteger(value) && value >= 400 && value <= 599) return value;
  throw new ValidationError(
    "status",
    `\`status\` must be an HTTP error status from 400 to 599 (e.g. 429 for a per-tenant quota), got ${String(value)}.`,
  );
}

/** The tenant options of a semaphore route, checked together: a tenant needs a cap, a cap needs a tenant. */
interface TenantConfig<Req> {
  tenant: ((request: Req) => string | undefined) | undefined;
  tenantLimit: number | ((tenant: string) => number) | undefined;
  tenantMaxQueue: number | undefined;
}

const NO_TENANTS: TenantConfig<unknown> = { tenant: undefined, tenantLimit: undefined, tenantMaxQueue: undefined };

function checkTenants<Req>(
  options: SemaphoreAdmissionOptions<Req, unknown>,
  limit: number | ((request: Req) => number),
  weight: number | ((request: Req) => number),
): TenantConfig<Req> {
  const tenant = optionalFunction<(request: Req) => string | undefined>("tenant", options.tenant);
  const { tenantLimit, tenantMaxQueue } = options;
  if (tenant === undefined) {
    if (tenantLimit === undefined && tenantMaxQueue === undefined) return NO_TENANTS;
    const option = tenantLimit !== undefined ? "tenantLimit" : "tenantMaxQueue";
    throw new ValidationError(
      "tenant",
      `\`${option}\` was given without \`tenant\`: pass a function naming each request's tenant, e.g. tenant: (req) => req.user.tenantId, or drop ${option}.`,
    );
  }
  if (tenantLimit === undefined) {
    throw new ValidationError(
      "tenantLimit",
      "`tenant` needs `tenantLimit`, the most permits one tenant may hold at once: a number (tenantLimit: 5) or a function of the tenant.",
    );
  }
  if (typeof tenantLimit !== "function") {
    integerAtLeast("tenantLimit", tenantLimit, 1, "Pass the most permits one tenant may hold at once, e.g. tenantLimit: 5.");
    if (typeof limit === "number" && tenantLimit > limit) {
      throw new ValidationError(
        "tenantLimit",
        `\`tenantLimit\` ${tenantLimit} is above the limit ${limit}: one tenant cannot hold more than all of them. Lower tenantLimit to ${limit} or less.`,
      );
    }
    if (typeof weight === "number" && weight > tenantLimit) {
      throw new ValidationError(
        "weight",
        `\`weight\` ${weight} is above \`tenantLimit\` ${tenantLimit}: no request could ever be admitted. Lower the weight or raise tenantLimit.`,
      );
    }
  }
  if (tenantMaxQueue !== undefined) {
    integerAtLeast(
      "tenantMaxQueue",
      tenantMaxQueue,
      1,
      "Pass the most requests of one tenant that may wait, e.g. tenantMaxQueue: 10.",
    );
  }
  return { tenant, tenantLimit, tenantMaxQueue };
}

function checkRetryAfter<F>(value: number | F | undefined): number | F | undefined {
  if (value === undefined || typeof value === "function") return value;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value;
  throw new ValidationError(
    "retryAfter",
    `\`retryAfter\` must be whole seconds (0 or more) or a function of the rejection, got ${String(value)}.`,
  );
}

function checkOnStoreError(value: "fail-closed" | "fail-open" | undefined): boolean {
  if (value === undefined || value === "fail-closed") return false;
  if (value === "fail-open") return true;
  throw new ValidationError("onStoreError", `\`onStoreError\` must be "fail-closed" or "fail-open", got ${String(value)}.`);
}

/**
 * Checks a route's options once, when the middleware (or decorator) is
 * created, and resolves them into the configuration the admission runs on.
 * `defaults` (a NestJS module's) apply where the route gives no value.
 * Unknown options are refused with a suggestion; every mistake is a
 * `ValidationError` naming the option. The engine's own options are passed
 * on to it as given, for it to check.
 *
 * @example
 * ```ts
 * const config = parseAdmissionOptions({ kind: "semaphore", name: "openai", limit: 20, options: { key } }, "semaphore middleware");
 * ```
 */
export function parseAdmissionOptions<Req, OnRejected>(
  route: AdmissionRoute<Req, OnRejected>,
  where: string,
  defaults?: AdmissionOptions<Req, OnRejected>,
): AdmissionConfig<Req, OnRejected> {
  const name = checkName(route.name);
  optionsObject(route.options, where);
  const options: AdmissionOptions<Req, OnRejected> =
    defaults === undefined ? (route.options ?? {}) : { ...defaults, ...route.options };
  knownOptions(options, route.kind === "semaphore" ? SEMAPHORE_OPTIONS : LOCK_OPTIONS, where);

  let limit: number | ((request: Req) => number) = 1;
  let weight: number | ((request: Req) => number) = 1;
  let tenants: TenantConfig<Req> = NO_TENANTS;
  let engine: EngineConfig;
  if (route.kind === "semaphore") {
    limit = route.limit;
    if (typeof limit !== "function") {
      integerAtLeast("limit", limit, 1, 'Pass how many requests may hold a permit at once, e.g. semaphore("openai", 20).');
    }
    const semaphoreOptions = route.options ?? {};
    weight = semaphoreOptions.weight ?? 1;
    if (typeof weight !== "function") integerAtLeast("weight", weight, 1, "Pass how many permits one request takes.");
    tenants = checkTenants(semaphoreOptions, limit, weight);
    const leaseMs = given(semaphoreOptions, ["leaseMs"] as const);
    // A limit function is asked per request; the primitive's own limit is then only a default.
    engine = {
      kind: "semaphore",
      options: { ...given(options, ENGINE_OPTIONS), ...leaseMs, limit: typeof limit === "number" ? limit : 1 },
    };
  } else {
    engine = { kind: "lock", options: { ...given(options, ENGINE_OPTIONS), ...given(route.options ?? {}, ["ttlMs"] as const) } };
  }

  const waits = typeof options.waitMs === "number" && options.waitMs > 0;
  const status = checkStatus(options.status, route.kind);
  return {
    kind: route.kind,
    name,
    limit,
    weight,
    ...tenants,
    exposeFence: optionalBoolean("exposeFence", options.exposeFence) ?? false,
    key: optionalFunction<(request: Req) => string>("key", options.key),
    skip: optionalFunction<(request: Req) => boolean | PromiseLike<boolean>>("skip", options.skip),
    status,
    // A tenant at its cap is over its own quota, not facing an overloaded service.
    tenantStatus: options.status === undefined ? 429 : status,
    retryAfter: checkRetryAfter(options.retryAfter),
    onRejected: optionalFunction<OnRejected>("onRejected", options.onRejected),
    failOpen: checkOnStoreError(options.onStoreError),
    onStoreUnavailable: optionalFunction<(error: StoreUnavailableError, request: Req) => void>(
      "onStoreUnavailable",
      options.onStoreUnavailable,
    ),
    onLeaseLost: optionalFunction<(error: LeaseLostError, request: Req) => void>("onLeaseLost", options.onLeaseLost),
    disconnectGraceMs:
      options.disconnectGraceMs === undefined
        ? DISCONNECT_GRACE_MS
        : positiveMs(
            "disconnectGraceMs",
            options.disconnectGraceMs,
            "Pass how long a handler may keep its permit after its client disconnected, e.g. disconnectGraceMs: 5000.",
          ),
    queues: waits,
    mayWait: waits || (typeof options.retries === "number" && options.retries > 0),
    engine,
  };
}
