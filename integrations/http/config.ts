import { type LeaseLostError, type StoreUnavailableError, ValidationError } from "../../src/errors/index.js";
import { unprefixed } from "../../src/errors/validation.js";
import type { LockOptions } from "../../src/lock/types.js";
import { DISCONNECT_GRACE_MS } from "../../src/options/defaults.js";
import {
  id as checkId,
  integerAtLeast,
  knownOptions,
  optionalBoolean,
  optionalFunction,
  optionsObject,
  positiveMs,
} from "../../src/options/validate.js";
import type { SemaphoreOptions } from "../../src/semaphore/types.js";
import { ENGINE_OPTIONS, LOCK_OPTIONS, SEMAPHORE_OPTIONS } from "./lists.js";
import type { AdmissionOptions, AdmissionRoute, RejectionContext, SemaphoreAdmissionOptions } from "./types.js";

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

/** The given values of `names`, leaving out those not given (an `undefined` is not passed on as a value). */
export function given<T extends object, K extends keyof T>(options: T, names: readonly K[]): Partial<Pick<T, K>> {
  const picked: Partial<Pick<T, K>> = {};
  for (const name of names) {
    const value = options[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
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
