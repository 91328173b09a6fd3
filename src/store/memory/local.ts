import type { Kind } from "../grouped.js";
import type { AcquireReply, Store, TenantOptions } from "../types.js";
import type { LocalJoin } from "./queue.js";

export type { Kind };

/**
 * What the embedded store offers the engine beyond the {@link Store}
 * contract: answers at once, without a promise, and a queue that hands a
 * freed permit straight to a waiter of this process (no grant to announce and
 * claim: the waiter is alive, it is in this process). `kind` picks the
 * primitive; a lock ignores `limit` and `weight`.
 */
export interface LocalStore extends Store {
  takeNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    tenant?: TenantOptions,
  ): AcquireReply;
  /** Takes at once, or queues as a waiter of this process until `join.until` (then `onGrant`), or refuses / is full. */
  waitNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    join: LocalJoin,
    tenant?: TenantOptions,
  ): AcquireReply;
  leaveNow(kind: Kind, key: string, token: string): void;
  /**
   * Reclaims lapsed leases and grants the waiters they make room for (a lease
   * that lapses frees nothing by itself: this is the call at its end); returns
   * the ms until the nearest lease ends, when to look again.
   */
  settleNow(kind: Kind, key: string): number;
  extendNow(kind: Kind, key: string, token: string, leaseMs: number): boolean;
  /** `heldMs`: how long the lease was held, for the id's typical hold (see `SemaphoreOperations.release`). */
  releaseNow(kind: Kind, key: string, token: string, heldMs?: number): boolean;
}
