/**
 * The lease engine: `semaphore` and `lock` over Redis or the embedded store,
 * the stores themselves, the errors and the diagnostics channels. The store
 * contract, for writing a store of your own, is `leasehold/store`.
 *
 * @module leasehold
 */

export {
  ClientAbortedError,
  LeaseholdError,
  type LeaseLostError,
  LockLeaseLostError,
  LockNotAcquiredError,
  type NotAcquiredReason,
  SemaphoreLeaseLostError,
  SemaphoreNotAcquiredError,
  ShutdownError,
  StorePermissionError,
  StoreUnavailableError,
  ValidationError,
} from "./errors/index.js";
export { MAX_OWNER_LENGTH } from "./lease/owner.js";
export type { Holder, Lease, LockLease, SemaphoreLease } from "./lease/types.js";
export { lock } from "./lock/index.js";
export type { Lock, LockAcquireOptions, LockOptions, LockRunOptions } from "./lock/types.js";
export { CHANNELS } from "./observability/events.js";
export type {
  AcquiredEvent,
  HttpRejectedEvent,
  LostEvent,
  RejectedEvent,
  ReleasedEvent,
  RenewErrorEvent,
  StoreDownEvent,
  StoreErrorEvent,
  StoreUpEvent,
  Subject,
} from "./observability/types.js";
export type { CallOptions, CloseOptions, KeepingOptions, OwnerOptions, RetryOptions, WaitOptions } from "./options/types.js";
export { MAX_ID_LENGTH } from "./options/validate.js";
export { semaphore } from "./semaphore/index.js";
export type {
  Semaphore,
  SemaphoreAcquireOptions,
  SemaphoreOptions,
  SemaphoreRunOptions,
  SemaphoreStats,
  TenantStats,
} from "./semaphore/types.js";
export type { ClientInput, StoreHealth } from "./store/access/types.js";
export type { LockStats } from "./store/contract/types.js";
export { memoryStore } from "./store/memory/index.js";
export type { MemoryStore, MemoryStoreOptions } from "./store/memory/types.js";
export { redisStore } from "./store/redis/index.js";
export type { RedisClient, RedisStore, RedisStoreOptions } from "./store/redis/types.js";
