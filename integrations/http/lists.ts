import { ENGINE_OPTIONS } from "../../src/options/lists.js";
import type { AdmissionOptions, LockAdmissionOptions, SemaphoreAdmissionOptions, SharedAdmissionOptions } from "./types.js";

/** Options passed through to the engine primitive as they are (it validates them itself, at creation): the engine's own list. */
export { ENGINE_OPTIONS };

/** Every option of {@link AdmissionOptions}: the engine's, and the adapter's own (test/http/option-lists.test.ts checks that it is all of them). */
export const ADAPTER_OPTIONS = [
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

/** Every option of {@link SemaphoreAdmissionOptions}. */
export const SEMAPHORE_OPTIONS = [
  ...ADAPTER_OPTIONS,
  "leaseMs",
  "weight",
  "tenant",
  "tenantLimit",
  "tenantMaxQueue",
] as const satisfies readonly (keyof SemaphoreAdmissionOptions<unknown>)[];

/** Every option of {@link LockAdmissionOptions}. */
export const LOCK_OPTIONS = [...ADAPTER_OPTIONS, "ttlMs"] as const satisfies readonly (keyof LockAdmissionOptions<unknown>)[];

/** The options of {@link SharedAdmissionOptions} every route takes as defaults (all but `shutdownGraceMs`). */
export const SHARED_DEFAULTS = [
  "client",
  "prefix",
  "onStoreError",
  "onStoreUnavailable",
  "onLeaseLost",
  "onRenewError",
  "disconnectGraceMs",
  "exposeFence",
] as const satisfies readonly (keyof SharedAdmissionOptions<unknown>)[];
