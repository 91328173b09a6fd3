import type { LossReason } from "./errors/lease-lost.js";
import { LockLeaseLostError, LockNotAcquiredError } from "./errors.js";
import { LeaseCall } from "./lease-call.js";
import { LeaseHandle } from "./lease-handle.js";
import type { Acquired, Refused } from "./outcomes.js";
import type { CallSettings } from "./settings.js";
import type { AcquireReply, QueueOptions, Store, WaiterRefresh } from "./store/types.js";
import type { TokenTag } from "./token.js";

/** One call of a lock, and the store calls of its acquisition and lease (see `LeaseCall`). */
export class LockCall extends LeaseCall {
  readonly limit = 1;
  readonly weight = 1;

  constructor(id: string, storeKey: string, settings: CallSettings, tag: TokenTag) {
    super("lock", id, storeKey, settings, tag);
  }

  take(store: Store, token: string, queue?: QueueOptions): Promise<AcquireReply> {
    return store.lock.acquire({ storeKey: this.storeKey, token, leaseMs: this.leaseMs, queue });
  }

  leave(store: Store, token: string): Promise<void> {
    return store.lock.leave({ storeKey: this.storeKey, token });
  }

  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Promise<WaiterRefresh> {
    return store.lock.refreshWaiters({ storeKey: this.storeKey, tokens, waiterLeaseMs });
  }

  extend(token: string, ms: number): Promise<boolean> {
    return this.store.lock.extend({ storeKey: this.storeKey, token, leaseMs: ms });
  }

  release(token: string, heldMs: number | undefined): Promise<boolean> {
    return this.store.lock.release({ storeKey: this.storeKey, token, heldMs });
  }

  lost(reason: LossReason): LockLeaseLostError {
    return new LockLeaseLostError(this.id, reason);
  }

  notAcquired(refused: Refused): LockNotAcquiredError {
    return new LockNotAcquiredError(this.id, refused.retryAfterMs, refused.reason, refused);
  }

  lease(had: Acquired): LeaseHandle {
    return new LeaseHandle(this, had);
  }
}
