// The contract's two groups (`store.semaphore`, `store.lock`) made once from what a store does for
// either kind, so that neither store spells out fifteen delegations of its own.
import type * as calls from "./calls.js";
import type {
  AcquireReply,
  Answer,
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
 * A store written as its steps, each for either kind where a semaphore and a
 * lock take the same one (a lock's calls are a semaphore's without `limit`,
 * `weight` or a tenant: a step reads those for a semaphore only). It gets the
 * contract's `semaphore` and `lock` groups over them, made once: a call costs
 * one function call more, no allocation. The groups do not use `this`, so a
 * wrapper may copy and override them (`{ ...store.semaphore, acquire }`).
 */
export abstract class GroupedStore {
  readonly semaphore: SemaphoreOperations;
  readonly lock: LockOperations;

  constructor() {
    ({ semaphore: this.semaphore, lock: this.lock } = groupedCalls(this));
  }

  abstract acquire(kind: Kind, call: calls.SemaphoreAcquireCall | calls.LockAcquireCall): Answer<AcquireReply>;
  abstract extend(kind: Kind, call: calls.SemaphoreExtendCall): Answer<boolean>;
  abstract release(kind: Kind, call: calls.SemaphoreReleaseCall): Answer<boolean>;
  abstract count(call: calls.KeyCall): Promise<number>;
  abstract semaphoreCounts(call: calls.SemaphoreStatsCall): Promise<SemaphoreCounts>;
  abstract lockStatus(call: calls.KeyCall): Promise<LockStats>;
  abstract inspect(kind: Kind, call: calls.KeyCall): Promise<Inspection>;
  abstract leave(kind: Kind, call: calls.TokenCall): Answer<void>;
  abstract refreshWaiters(kind: Kind, call: calls.RefreshWaitersCall): Answer<WaiterRefresh>;
}

function groupedCalls(steps: GroupedStore): { semaphore: SemaphoreOperations; lock: LockOperations } {
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
