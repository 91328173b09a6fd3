import type { LockAcquireOptions, LockOptions, LockRunOptions } from "../lock/types.js";
import type { SemaphoreAcquireOptions, SemaphoreOptions, SemaphoreRunOptions } from "../semaphore/types.js";
import type {
  CallOptions,
  CloseOptions,
  KeepingOptions,
  OwnerOptions,
  RetryOptions,
  TenantCallOptions,
  TenantFactoryOptions,
  WaitOptions,
} from "./types.js";

// The names each call accepts (anything else is refused, see `knownOptions`). Each list
// `satisfies` its interface, so it names nothing the interface lacks; test/engine/option-lists.test.ts
// fails when an interface gains an option its list lacks.

/** The names of some of `T`'s options. */
type Names<T> = readonly (keyof T)[];

export const RETRY_OPTIONS = ["retries", "retryDelayMs"] as const satisfies Names<RetryOptions>;
export const WAIT_OPTIONS = ["waitMs", "maxQueue"] as const satisfies Names<WaitOptions>;
export const CALL_OPTIONS = ["signal"] as const satisfies Names<CallOptions>;
export const OWNER_OPTIONS = ["owner"] as const satisfies Names<OwnerOptions>;
export const KEEPING_OPTIONS = ["heartbeatMs", "onRenewError"] as const satisfies Names<KeepingOptions>;
export const TENANT_CALL_OPTIONS = ["tenant", "tenantLimit", "tenantMaxQueue"] as const satisfies Names<TenantCallOptions>;
export const TENANT_FACTORY_OPTIONS = ["tenantLimit", "tenantMaxQueue"] as const satisfies Names<TenantFactoryOptions>;
export const CLOSE_OPTIONS = ["graceMs"] as const satisfies Names<CloseOptions>;
/** `stats(id, { tenant, tenantLimit })` of a semaphore. */
export const TENANT_STATS_OPTIONS = ["tenant", "tenantLimit"] as const satisfies Names<TenantCallOptions>;

/**
 * The factory options a semaphore and a lock share: where leases live, how a
 * call waits when full, how `run` keeps its lease. An HTTP adapter passes
 * these through to its primitive as they are given.
 */
export const ENGINE_OPTIONS = [
  "client",
  "prefix",
  ...RETRY_OPTIONS,
  ...WAIT_OPTIONS,
  ...KEEPING_OPTIONS,
] as const satisfies readonly (keyof SemaphoreOptions & keyof LockOptions)[];

export const SEMAPHORE_FACTORY_OPTIONS = [
  ...ENGINE_OPTIONS,
  "limit",
  "leaseMs",
  ...TENANT_FACTORY_OPTIONS,
  ...OWNER_OPTIONS,
] as const satisfies Names<SemaphoreOptions>;
export const SEMAPHORE_ACQUIRE_OPTIONS = [
  "leaseMs",
  ...RETRY_OPTIONS,
  ...WAIT_OPTIONS,
  "weight",
  "limit",
  ...CALL_OPTIONS,
  ...TENANT_CALL_OPTIONS,
  ...OWNER_OPTIONS,
] as const satisfies Names<SemaphoreAcquireOptions>;
export const SEMAPHORE_RUN_OPTIONS = [
  ...SEMAPHORE_ACQUIRE_OPTIONS,
  ...KEEPING_OPTIONS,
] as const satisfies Names<SemaphoreRunOptions>;

export const LOCK_FACTORY_OPTIONS = [...ENGINE_OPTIONS, "ttlMs", ...OWNER_OPTIONS] as const satisfies Names<LockOptions>;
export const LOCK_ACQUIRE_OPTIONS = [
  "ttlMs",
  ...RETRY_OPTIONS,
  ...WAIT_OPTIONS,
  ...CALL_OPTIONS,
  ...OWNER_OPTIONS,
] as const satisfies Names<LockAcquireOptions>;
export const LOCK_RUN_OPTIONS = [...LOCK_ACQUIRE_OPTIONS, ...KEEPING_OPTIONS] as const satisfies Names<LockRunOptions>;
