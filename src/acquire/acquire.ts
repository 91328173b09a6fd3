import type { LeaseCall } from "../lease/call.js";
import { newToken, stampToken } from "../lease/token.js";
import type { CallSettings } from "../options/settings.js";
import { pauseUnlessAborted } from "../runtime/aborts.js";
import { acquireOrCleanUp, leave, waiterLeaseOf } from "../store/access/bounded.js";
import type { StoreSource } from "../store/access/client.js";
import type { QueueOptions } from "../store/contract/calls.js";
import type { AcquireReply, Store } from "../store/contract/types.js";
import { isMemoryStore } from "../store/memory/index.js";
import { acquireLocally } from "./acquire-local.js";
import { acquired, refused, why } from "./outcomes.js";
import type { Acquired, Refused } from "./types.js";
import { WaitEnded, waitForGrant } from "./waiting.js";

/**
 * Takes a lease in one of three modes. Fail fast (default): one attempt.
 * Spin (`retries`): `1 + retries` attempts, `retryDelayMs` apart. Queue
 * (`waitMs`): join the id's FIFO queue and wait for the store to grant,
 * woken by notification. One token throughout, so a late answer to an
 * earlier attempt is the same lease. `sentAt` is when the winning attempt
 * was sent: the lease's deadline counts from there.
 */
export function acquireLease(
  source: StoreSource,
  settings: CallSettings,
  call: LeaseCall,
): Acquired | Refused | Promise<Acquired | Refused> {
  settings.signal?.throwIfAborted();
  const startedAt = performance.now();
  const got = source.get();
  if (got instanceof Promise) return got.then((store) => acquireFrom(store, settings, call, startedAt, performance.now()));
  return acquireFrom(got, settings, call, startedAt, startedAt);
}

/**
 * The embedded store's fail-fast acquire answers in the same turn, with no
 * promise at all (the common in-process case, and a measurable share of it);
 * everything else is asynchronous. `now`: a clock reading made just now (the
 * token's time, and the store's: one reading rather than one per layer).
 */
function acquireFrom(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  startedAt: number,
  now: number,
): Acquired | Refused | Promise<Acquired | Refused> {
  // The token says who took the lease and when (for `holders`, at no extra store cost); a tenant's
  // lease carries its tenant too: every later call on the lease counts against it.
  const token = stampToken(newToken(), call.tag, call.tenant?.name, now);
  if (!isMemoryStore(store)) return acquireRemotely(store, settings, call, token, startedAt);
  if (settings.waitMs > 0 || settings.retries > 0) return acquireLocally(store, settings, call, token, startedAt, now);
  const reply = store.takeNow(call.kind, call.storeKey, token, call.limit, call.weight, call.leaseMs, call.tenant, now);
  return reply.acquired
    ? acquired(store, token, reply.fence as number, now, startedAt, now - startedAt, reply.held)
    : refused(call, reply, why(reply), startedAt);
}

async function acquireRemotely(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  const { signal } = settings;

  // Fail fast, the common case, without the closures the other modes need.
  if (settings.waitMs === 0 && settings.retries === 0) {
    const sentAt = performance.now();
    const reply = await acquireOrCleanUp(store, call, token);
    if (signal?.aborted) await abandon(store, call, token, signal);
    return reply.acquired
      ? acquired(store, token, reply.fence as number, sentAt, startedAt)
      : refused(call, reply, why(reply), startedAt);
  }

  const attempt = async (queue?: QueueOptions): Promise<AcquireReply> => {
    const reply = await acquireOrCleanUp(store, call, token, queue);
    if (signal?.aborted) await abandon(store, call, token, signal);
    return reply;
  };

  if (settings.waitMs > 0) {
    const queue: QueueOptions = { waiterLeaseMs: waiterLeaseOf(store), maxQueue: settings.maxQueue };
    const sentAt = performance.now();
    // Joining: a failure here ends the call, with the clean-up of an unknown outcome.
    const reply = await attempt(queue);
    if (reply.acquired) return acquired(store, token, reply.fence as number, sentAt, startedAt);
    if (reply.queued !== true) {
      return refused(call, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt);
    }
    try {
      const granted = await waitForGrant({
        store,
        ops: call,
        token,
        queue,
        deadline: startedAt + settings.waitMs,
        signal,
        retryAfterMs: reply.retryAfterMs,
        joinedAt: sentAt,
      });
      const had = acquired(store, token, granted.fence as number, "sentAt" in granted ? granted.sentAt : sentAt, startedAt);
      if ("until" in granted) had.until = granted.until;
      return had;
    } catch (error) {
      // The nearest lease end as the last look at the queue found it; the typical hold as the join did.
      if (error instanceof WaitEnded) {
        return refused(call, { retryAfterMs: error.retryAfterMs, holdMs: reply.holdMs }, error.reason, startedAt);
      }
      throw error;
    }
  }

  for (let count = 0; ; count++) {
    const sentAt = performance.now();
    const reply = await attempt();
    if (reply.acquired) return acquired(store, token, reply.fence as number, sentAt, startedAt);
    if (count >= settings.retries) return refused(call, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, signal);
  }
}

/**
 * The caller gave up (or the primitive is closing) while an attempt was in
 * flight: nobody will use this permit or place. It is given back before the
 * call rejects, so that a `close()` waiting for the call also waits for it.
 */
async function abandon(store: Store, call: LeaseCall, token: string, signal: AbortSignal): Promise<never> {
  await leave(store, call, token).catch(() => {});
  throw signal.reason;
}
