import type { NotAcquiredReason } from "../errors/index.js";
import type { Store } from "../store/contract/types.js";

/** Why no lease was had: every permit taken (fail fast or spin), the queue at `maxQueue`, or `waitMs` spent. */
export type RefusalReason = NotAcquiredReason;

/**
 * A lease had: it runs a full lease from `sentAt`, or, handed off from the
 * queue without a claim round trip, until `until` at least, to be confirmed
 * (see `waitForGrant`).
 */
export type Acquired = {
  acquired: true;
  store: Store;
  token: string;
  /** The grant's fence (see `Lease.fence`). */
  fence: number;
  sentAt: number;
  waitedMs: number;
  until?: number;
  /** The store's record of the lease (`AcquireReply.record`), handed back on release and extend. */
  record: object | undefined;
};

/**
 * A refusal. `retryAfterMs` is the estimate (see `retryEstimateMs`), from
 * the id's typical hold (`holdMs`, the store's record) and the nearest lease
 * end (`expiresInMs`).
 */
export type Refused = {
  acquired: false;
  retryAfterMs: number;
  holdMs: number | undefined;
  expiresInMs: number;
  reason: RefusalReason;
  waitedMs: number;
};
