/**
 * The store contract, for writing a store of your own or wrapping one: the
 * `Store` the engine calls, each call's argument and each reply, and the two
 * stores leasehold ships.
 *
 * @module leasehold/store
 */
export type {
  FreshToken,
  Grant,
  InProcessWaiter,
  KeyCall,
  LeaseRecord,
  LockAcquireCall,
  LockExtendCall,
  LockReleaseCall,
  QueueOptions,
  RefreshWaitersCall,
  SemaphoreAcquireCall,
  SemaphoreExtendCall,
  SemaphoreReleaseCall,
  SemaphoreStatsCall,
  TenantOptions,
  TokenCall,
  WatchCall,
} from "./contract/calls.js";
export type {
  AcquireReply,
  Answer,
  InspectedEntry,
  Inspection,
  LockOperations,
  LockStats,
  SemaphoreCounts,
  SemaphoreOperations,
  Store,
  WaiterRefresh,
  WaiterStatus,
} from "./contract/types.js";
export { memoryStore } from "./memory/index.js";
export type { MemoryStore, MemoryStoreOptions } from "./memory/types.js";
export { redisStore } from "./redis/index.js";
export type { IoredisLikeClient, NodeRedisLikeClient, RedisClient, RedisStore, RedisStoreOptions } from "./redis/types.js";
