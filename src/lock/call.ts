import type { Acquired, Refused } from "../acquire/types.js";
import { LockLeaseLostError, LockNotAcquiredError } from "../errors/index.js";
import type { LossReason } from "../errors/lease-lost.js";
import { LeaseCall } from "../lease/call.js";
import { LeaseHandle } from "../lease/handle.js";
import type { TokenTag } from "../lease/token.js";
import type { CallSettings } from "../options/settings.js";
import type { QueueOptions } from "../store/contract/calls.js";
import type { AcquireReply, Answer, Store, WaiterRefresh } from "../store/contract/types.js";

/** One call of a lock, and the store calls of its acquisition and lease (see `LeaseCall`). */
export class LockCall extends LeaseCall<LeaseHandle> {
  readonly limit = 1;
  readonly weight = 1;

  constructor(id: string, storeKey: string, settings: CallSettings, tag: TokenTag) {
    super("lock", id, storeKey, settings, tag);
  }

  take(store: Store, token: string, queue?: QueueOptions, madeAt?: number): Answer<AcquireReply> {
    return store.lock.acquire({ storeKey: this.storeKey, token, leaseMs: this.leaseMs, queue, madeAt });
  }

  leave(store: Store, token: string): Answer<void> {
    return store.lock.leave({ storeKey: this.storeKey, token });
  }

  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Answer<WaiterRefresh> {
    return store.lock.refreshWaiters({ storeKey: this.storeKey, tokens, waiterLeaseMs });
  }

  extend(token: string, ms: number, record?: object): Answer<boolean> {
    return this.store.lock.extend({ storeKey: this.storeKey, token, leaseMs: ms, record });
  }

  release(token: string, heldMs: number | undefined, record?: object, sentAt?: number): Answer<boolean> {
    return this.store.lock.release({ storeKey: this.storeKey, token, heldMs, record, sentAt });
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
