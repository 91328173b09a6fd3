/**
 * The lease engine: `semaphore` and `lock` over Redis or the embedded store,
 * the stores themselves, the errors and the diagnostics channels.
 *
 * @module leasehold
 */
export type { StoreHealth } from "./breaker.js";
export type { ClientInput } from "./client.js";
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
} from "./errors.js";
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
} from "./events.js";
export type { CloseOptions } from "./holdings.js";
export type { Lease, LockLease, SemaphoreLease } from "./lease.js";
export { type Lock, type LockAcquireOptions, type LockOptions, type LockRunOptions, lock } from "./lock.js";
export type { CallOptions, KeepingOptions, OwnerOptions, RetryOptions, WaitOptions } from "./options.js";
export { type Holder, MAX_OWNER_LENGTH } from "./owner.js";
export {
  type Semaphore,
  type SemaphoreAcquireOptions,
  type SemaphoreOptions,
  type SemaphoreRunOptions,
  type SemaphoreStats,
  semaphore,
  type TenantStats,
} from "./semaphore.js";
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
} from "./store/calls.js";
export { type MemoryStore, type MemoryStoreOptions, memoryStore } from "./store/memory.js";
export {
  type IoredisLikeClient,
  type NodeRedisLikeClient,
  type RedisClient,
  type RedisStore,
  type RedisStoreOptions,
  redisStore,
} from "./store/redis.js";
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
} from "./store/types.js";
export { MAX_ID_LENGTH } from "./validate.js";
