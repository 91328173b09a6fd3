import type { TenantOptions } from "../contract/calls.js";
import type { Kind } from "../contract/grouped.js";
import type { AcquireReply, Store } from "../contract/types.js";
import type { LocalJoin } from "./queue.js";

export type { Kind };

/**
 * An answer of `takeNow` / `waitNow`. `held`, when acquired: the store's
 * record of the lease, for the engine to pass back to `releaseNow` and
 * `extendNow` so that the store finds the lease without looking its token up
 * (a fresh token's hash costs a tenth of an in-process cycle). The token is
 * still checked: a record that is not that token's live lease on that id is
 * ignored and the token decides, exactly as without one.
 */
export type LocalReply = AcquireReply & { held?: object };

/** A call's tenant options, with its name when the engine passes them (see `fresh`). */
export type Named = TenantOptions & { readonly name?: string };

/**
 * What the embedded store offers the engine beyond the {@link Store}
 * contract: answers at once, without a promise, and a queue that hands a
 * freed permit straight to a waiter of this process (no grant to announce and
 * claim: the waiter is alive, it is in this process). `kind` picks the
 * primitive; a lock ignores `limit` and `weight`.
 *
 * `fresh`, on an acquire: the engine has just made `token`, reading
 * `performance.now()` at `fresh`. Such a token holds nothing and waits
 * nowhere yet (a re-sent acquire's lookups are skipped) and carries the
 * tenant `tenant.name` (or none); on the process clock the reading is the
 * store's time too. `at`, on a release: the caller's reading, the same way.
 */
export interface LocalStore extends Store {
  takeNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    tenant?: Named,
    fresh?: number,
  ): LocalReply;
  /** Takes at once, or queues as a waiter of this process until `join.until` (then `onGrant`), or refuses / is full. */
  waitNow(
    kind: Kind,
    key: string,
    token: string,
    limit: number,
    weight: number,
    join: LocalJoin,
    tenant?: Named,
    fresh?: number,
  ): LocalReply;
  leaveNow(kind: Kind, key: string, token: string): void;
  /**
   * Reclaims lapsed leases and grants the waiters they make room for (a lease
   * that lapses frees nothing by itself: this is the call at its end); returns
   * the ms until the nearest lease ends, when to look again.
   */
  settleNow(kind: Kind, key: string): number;
  /** `held`: the acquire's `LocalReply.held`, if any. */
  extendNow(kind: Kind, key: string, token: string, leaseMs: number, held?: object): boolean;
  /**
   * `heldMs`: how long the lease was held, for the id's typical hold (see
   * `SemaphoreOperations.release`); `held`: the acquire's `LocalReply.held`, if any.
   */
  releaseNow(kind: Kind, key: string, token: string, heldMs?: number, at?: number, held?: object): boolean;
}
