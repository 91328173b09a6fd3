import type { LeaseCall } from "../lease/call.js";
import { channels } from "../observability/events.js";
import type { AcquiredEvent, RejectedEvent } from "../observability/types.js";
import { RETRY_AFTER_DEFAULT_MS } from "../options/defaults.js";
import type { AcquireReply, Store } from "../store/contract/types.js";
import type { Acquired, RefusalReason, Refused } from "./types.js";

/**
 * When a retry is likely to succeed: the typical hold (or, unknown, the
 * default), never later than the nearest lease end, the latest a permit frees.
 */
export function retryEstimateMs(holdMs: number | undefined, expiresInMs: number): number {
  return Math.min(holdMs ?? RETRY_AFTER_DEFAULT_MS, expiresInMs);
}

/** The reason of a refusal that was not a full queue. */
export const why = (reply: AcquireReply): RefusalReason => (reply.tenantFull === true ? "tenant-full" : "full");

// Every outcome leaves through one of these two; a refusal is published here, a lease by `publishAcquired`
// once the engine has it (a local waiter's grant is made inside the store's call, where nothing may be published).
/** `fence`: the grant's (a store's reply, or a grant heard while waiting); `record`: the store's (`AcquireReply.record`). */
export function acquired(
  store: Store,
  token: string,
  fence: number,
  sentAt: number,
  startedAt: number,
  waitedMs = performance.now() - startedAt,
  record?: object,
): Acquired {
  return { acquired: true, store, token, fence, sentAt, waitedMs, record };
}

/** Publishes a lease had (see {@link acquired}). */
export function publishAcquired(call: LeaseCall, had: Acquired): void {
  if (channels.acquired.hasSubscribers) {
    const { token, fence, waitedMs } = had;
    channels.acquired.publish({ ...call.subject, token, fence, waitedMs, ...call.permits } satisfies AcquiredEvent);
  }
}

/** `reply`: the store's answer (its `retryAfterMs` is the nearest lease end). */
export function refused(
  call: LeaseCall,
  reply: { retryAfterMs: number; holdMs?: number | undefined },
  reason: RefusalReason,
  startedAt: number,
): Refused {
  const waitedMs = performance.now() - startedAt;
  if (channels.rejected.hasSubscribers) {
    channels.rejected.publish({
      ...call.subject,
      reason,
      waitedMs,
      ...(call.permits && { limit: call.permits.limit }),
    } satisfies RejectedEvent);
  }
  const { retryAfterMs: expiresInMs, holdMs } = reply;
  return { acquired: false, retryAfterMs: retryEstimateMs(holdMs, expiresInMs), holdMs, expiresInMs, reason, waitedMs };
}
