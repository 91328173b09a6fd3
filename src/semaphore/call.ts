import type { Acquired, Refused } from "../acquire/types.js";
import { SemaphoreLeaseLostError, SemaphoreNotAcquiredError } from "../errors/index.js";
import type { LossReason } from "../errors/lease-lost.js";
import { LeaseCall, type Tenant } from "../lease/call.js";
import { LeaseHandle } from "../lease/handle.js";
import type { TokenTag } from "../lease/token.js";
import type { SemaphoreLease } from "../lease/types.js";
import type { CallSettings } from "../options/settings.js";
import type { QueueOptions } from "../store/contract/calls.js";
import type { AcquireReply, Answer, Store, WaiterRefresh } from "../store/contract/types.js";

/** A semaphore's lease: the limit, weight and tenant it was taken with. */
export class SemaphoreLeaseHandle extends LeaseHandle implements SemaphoreLease {
  readonly limit: number;
  readonly weight: number;
  readonly tenant: string | undefined;

  constructor(call: SemaphoreCall, had: Acquired) {
    super(call, had);
    this.limit = call.limit;
    this.weight = call.weight;
    this.tenant = call.tenant?.name;
  }
}

/** One call of a semaphore, and the store calls of its acquisition and lease (see `LeaseCall`). */
export class SemaphoreCall extends LeaseCall<SemaphoreLeaseHandle> {
  constructor(
    id: string,
    storeKey: string,
    settings: CallSettings,
    readonly limit: number,
    readonly weight: number,
    tag: TokenTag,
    tenant: Tenant | undefined,
  ) {
    super("semaphore", id, storeKey, settings, tag, tenant);
  }

  override get permits(): { limit: number; weight: number } {
    return { limit: this.limit, weight: this.weight };
  }

  take(store: Store, token: string, queue?: QueueOptions, madeAt?: number): Answer<AcquireReply> {
    return store.semaphore.acquire({
      storeKey: this.storeKey,
      token,
      limit: this.limit,
      weight: this.weight,
      leaseMs: this.leaseMs,
      queue,
      tenant: this.tenant,
      madeAt,
      recorded: true,
    });
  }

  leave(store: Store, token: string): Answer<void> {
    return store.semaphore.leave({ storeKey: this.storeKey, token });
  }

  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Answer<WaiterRefresh> {
    return store.semaphore.refreshWaiters({ storeKey: this.storeKey, tokens, waiterLeaseMs });
  }

  extend(token: string, ms: number, record?: object): Answer<boolean> {
    return this.store.semaphore.extend({ storeKey: this.storeKey, token, leaseMs: ms, weight: this.weight, record });
  }

  release(token: string, heldMs: number | undefined, record?: object, sentAt?: number): Answer<boolean> {
    return this.store.semaphore.release({ storeKey: this.storeKey, token, weight: this.weight, heldMs, record, sentAt });
  }

  lost(reason: LossReason): SemaphoreLeaseLostError {
    return new SemaphoreLeaseLostError(this.id, this.limit, reason);
  }

  notAcquired(refused: Refused): SemaphoreNotAcquiredError {
    return new SemaphoreNotAcquiredError(this.id, this.limit, refused.retryAfterMs, refused.reason, this.tenant, refused);
  }

  lease(had: Acquired): SemaphoreLeaseHandle {
    return new SemaphoreLeaseHandle(this, had);
  }
}
