// The contract's two groups (`store.semaphore`, `store.lock`) made once from what a store does for
// either kind, so that neither store spells out fifteen delegations of its own.
import type {
  KeyCall,
  LockAcquireCall,
  RefreshWaitersCall,
  SemaphoreAcquireCall,
  SemaphoreExtendCall,
  SemaphoreReleaseCall,
  SemaphoreStatsCall,
  TokenCall,
} from "./calls.js";
import type {
  AcquireReply,
  Inspection,
  LockOperations,
  LockStats,
  SemaphoreCounts,
  SemaphoreOperations,
  WaiterRefresh,
} from "./types.js";

/** Which primitive a step is for. */
export type Kind = "semaphore" | "lock";

/**
 * One store's steps, each for either kind where a semaphore and a lock take
 * the same one (a lock's calls are a semaphore's without `limit`, `weight`
 * or a tenant: a step reads those for a semaphore only).
 */
export interface StoreSteps {
  acquire(kind: Kind, call: SemaphoreAcquireCall | LockAcquireCall): Promise<AcquireReply>;
  extend(kind: Kind, call: SemaphoreExtendCall): Promise<boolean>;
  release(kind: Kind, call: SemaphoreReleaseCall): Promise<boolean>;
  count(call: KeyCall): Promise<number>;
  semaphoreCounts(call: SemaphoreStatsCall): Promise<SemaphoreCounts>;
  lockStatus(call: KeyCall): Promise<LockStats>;
  inspect(kind: Kind, call: KeyCall): Promise<Inspection>;
  leave(kind: Kind, call: TokenCall): Promise<void>;
  refreshWaiters(kind: Kind, call: RefreshWaitersCall): Promise<WaiterRefresh>;
}

/**
 * The `semaphore` and `lock` groups of a store, over its steps. Made once per
 * store: a call costs one function call more, no allocation. The groups do
 * not use `this`, so a wrapper may copy and override them
 * (`{ ...store.semaphore, acquire }`).
 */
export function groupedCalls(steps: StoreSteps): { semaphore: SemaphoreOperations; lock: LockOperations } {
  return {
    semaphore: {
      acquire: (call) => steps.acquire("semaphore", call),
      extend: (call) => steps.extend("semaphore", call),
      release: (call) => steps.release("semaphore", call),
      count: (call) => steps.count(call),
      stats: (call) => steps.semaphoreCounts(call),
      inspect: (call) => steps.inspect("semaphore", call),
      leave: (call) => steps.leave("semaphore", call),
      refreshWaiters: (call) => steps.refreshWaiters("semaphore", call),
    },
    lock: {
      acquire: (call) => steps.acquire("lock", call),
      extend: (call) => steps.extend("lock", call),
      release: (call) => steps.release("lock", call),
      stats: (call) => steps.lockStatus(call),
      inspect: (call) => steps.inspect("lock", call),
      leave: (call) => steps.leave("lock", call),
      refreshWaiters: (call) => steps.refreshWaiters("lock", call),
    },
  };
}
