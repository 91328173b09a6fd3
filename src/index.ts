/**
 * The lease engine: `semaphore` and `lock` over Redis or the embedded store,
 * the stores themselves, the errors and the diagnostics channels.
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
export type { CloseOptions } from "./lease/holdings.js";
export { type Holder, MAX_OWNER_LENGTH } from "./lease/owner.js";
export type { Lease, LockLease, SemaphoreLease } from "./lease/types.js";
export { type Lock, type LockAcquireOptions, type LockOptions, type LockRunOptions, lock } from "./lock/index.js";
export {
  type AcquiredEvent,
  CHANNELS,
  type HttpRejectedEvent,
  type LostEvent,
  type RejectedEvent,
  type ReleasedEvent,
  type RenewErrorEvent,
  type StoreDownEvent,
  type StoreErrorEvent,
  type StoreUpEvent,
  type Subject,
} from "./observability/events.js";
export type { CallOptions, KeepingOptions, OwnerOptions, RetryOptions, WaitOptions } from "./options/types.js";
export { MAX_ID_LENGTH } from "./options/validate.js";
export {
  type Semaphore,
  type SemaphoreAcquireOptions,
  type SemaphoreOptions,
  type SemaphoreRunOptions,
  type SemaphoreStats,
  semaphore,
  type TenantStats,
} from "./semaphore/index.js";
export type { StoreHealth } from "./store/access/breaker.js";
export type { ClientInput } from "./store/access/client.js";
export type {
  KeyCall,
  LockAcquireCall,
  LockExtendCall,
  LockReleaseCall,
  RefreshWaitersCall,
  SemaphoreAcquireCall,
  SemaphoreExtendCall,
  SemaphoreReleaseCall,
  SemaphoreStatsCall,
  TokenCall,
  WatchCall,
} from "./store/contract/calls.js";
export type {
  AcquireReply,
  Grant,
  InspectedEntry,
  Inspection,
  LockOperations,
  LockStats,
  QueueOptions,
  SemaphoreCounts,
  SemaphoreOperations,
  Store,
  TenantOptions,
  WaiterRefresh,
  WaiterStatus,
} from "./store/contract/types.js";
export { type MemoryStore, type MemoryStoreOptions, memoryStore } from "./store/memory/index.js";
export {
  type IoredisLikeClient,
  type NodeRedisLikeClient,
  type RedisClient,
  type RedisStore,
  type RedisStoreOptions,
  redisStore,
} from "./store/redis/index.js";
