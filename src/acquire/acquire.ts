import type { LeaseCall } from "../lease/call.js";
import { newToken, stampToken } from "../lease/token.js";
import type { CallSettings } from "../options/settings.js";
import { pauseUnlessAborted } from "../runtime/aborts.js";
import { acquireOrCleanUp, isPending, leave, waiterLeaseOf } from "../store/access/bounded.js";
import type { StoreSource } from "../store/access/client.js";
import type { QueueOptions } from "../store/contract/calls.js";
import type { AcquireReply, Store } from "../store/contract/types.js";
import { HandOffWait } from "./hand-off-wait.js";
import { acquired, refused, why } from "./outcomes.js";
import type { Acquired, Refused } from "./types.js";
import { WaitEnded, waitForGrant } from "./waiting.js";

type Outcome = Acquired | Refused | Promise<Acquired | Refused>;

/**
 * Takes a lease in one of three modes. Fail fast (default): one attempt.
 * Spin (`retries`): `1 + retries` attempts, `retryDelayMs` apart. Queue
 * (`waitMs`): join the id's FIFO queue and wait for the store to grant,
 * woken by notification, or served by the store itself. One token
 * throughout, so a late answer to an earlier attempt is the same lease.
 * `sentAt` is when the winning attempt was sent: the lease's deadline counts
 * from there. A store that answers at once (see `Answer`) is answered in the
 * same turn, with no promise, on the same path.
 */
export function acquireLease(source: StoreSource, settings: CallSettings, call: LeaseCall): Outcome {
  settings.signal?.throwIfAborted();
  const startedAt = performance.now();
  const got = source.get();
  if (got instanceof Promise) return got.then((store) => acquireFrom(store, settings, call, startedAt, performance.now()));
  return acquireFrom(got, settings, call, startedAt, startedAt);
}

/**
 * `now`: a clock reading made just now: the token's time, the first
 * attempt's send time, and the store's (one reading rather than one per layer).
 */
function acquireFrom(store: Store, settings: CallSettings, call: LeaseCall, startedAt: number, now: number): Outcome {
  // The token says who took the lease and when (for `holders`, at no extra store cost); a tenant's
  // lease carries its tenant too: every later call on the lease counts against it.
  const token = stampToken(newToken(), call.tag, call.tenant?.name, now);
  if (settings.waitMs > 0) return join(store, settings, call, token, startedAt, now);
  if (settings.retries > 0) return spin(store, settings, call, token, startedAt, now);
  // Fail fast, the common case, without the closures the other modes need.
  const answer = acquireOrCleanUp(store, call, token, undefined, now);
  if (isPending(answer)) return answer.then((reply) => once(store, settings, call, token, startedAt, now, reply));
  return once(store, settings, call, token, startedAt, now, answer, now - startedAt);
}

/** A fail-fast attempt's outcome (`waitedMs`: known when it was answered at once). */
function once(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  sentAt: number,
  reply: AcquireReply,
  waitedMs?: number,
): Outcome {
  const { signal } = settings;
  if (signal?.aborted) return abandon(store, call, token, signal);
  return reply.acquired
    ? acquired(store, token, reply.fence as number, sentAt, startedAt, waitedMs, reply.record)
    : refused(call, reply, why(reply), startedAt);
}

async function spin(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  now: number,
): Promise<Acquired | Refused> {
  const { signal } = settings;
  for (let count = 0; ; count++) {
    const sentAt = count === 0 ? now : performance.now();
    // Its first attempt is of a fresh token (see `FreshToken`): a later one may find its own earlier grant.
    const reply = await acquireOrCleanUp(store, call, token, undefined, count === 0 ? now : undefined);
    if (signal?.aborted) await abandon(store, call, token, signal);
    if (reply.acquired) return acquired(store, token, reply.fence as number, sentAt, startedAt, undefined, reply.record);
    if (count >= settings.retries) return refused(call, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, signal);
    // Refused, it holds nothing: an abort during the pause ends the call without another attempt.
    signal?.throwIfAborted();
  }
}

/**
 * Joins the queue: admitted or refused at once, or queued. A store that
 * takes the join as a waiter of its own (`handedOff`) serves it; any other
 * queued join waits for an announced grant and claims it.
 */
function join(store: Store, settings: CallSettings, call: LeaseCall, token: string, startedAt: number, now: number): Outcome {
  const waiter = new HandOffWait(store, settings, call, token, startedAt);
  const queue: QueueOptions = { waiterLeaseMs: waiterLeaseOf(store), maxQueue: settings.maxQueue, waiter };
  // Joining: a failure here ends the call, with the clean-up of an unknown outcome.
  const answer = acquireOrCleanUp(store, call, token, queue, now);
  if (isPending(answer)) {
    return answer.then((reply) => joined(store, settings, call, token, startedAt, now, queue, waiter, reply));
  }
  return joined(store, settings, call, token, startedAt, now, queue, waiter, answer, now - startedAt);
}

function joined(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  sentAt: number,
  queue: QueueOptions,
  waiter: HandOffWait,
  reply: AcquireReply,
  waitedMs?: number,
): Outcome {
  const { signal } = settings;
  if (signal?.aborted) return abandon(store, call, token, signal);
  if (reply.acquired) return acquired(store, token, reply.fence as number, sentAt, startedAt, waitedMs, reply.record);
  if (reply.queued !== true) return refused(call, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt);
  if (reply.handedOff === true) return waiter.queued(reply, sentAt);
  return awaitGrant(store, settings, call, token, startedAt, sentAt, queue, reply);
}

async function awaitGrant(
  store: Store,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  sentAt: number,
  queue: QueueOptions,
  reply: AcquireReply,
): Promise<Acquired | Refused> {
  try {
    const granted = await waitForGrant({
      store,
      ops: call,
      token,
      queue,
      deadline: startedAt + settings.waitMs,
      signal: settings.signal,
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

/**
 * The caller gave up (or the primitive is closing) while an attempt was in
 * flight: nobody will use this permit or place. It is given back before the
 * call rejects, so that a `close()` waiting for the call also waits for it.
 */
async function abandon(store: Store, call: LeaseCall, token: string, signal: AbortSignal): Promise<never> {
  await leave(store, call, token).catch(() => {});
  throw signal.reason;
}
