import { offAbort, onAbort, pauseUnlessAborted } from "./aborts.js";
import type { LeaseCall } from "./lease-call.js";
import { type Acquired, acquired, type Refused, refused, why } from "./outcomes.js";
import type { CallSettings } from "./settings.js";
import type { LocalStore } from "./store/memory.js";
import { type Due, foregroundTimers } from "./timers.js";

/**
 * The embedded store answers at once, and hands a freed permit straight to a
 * waiter of this process: no round trip to bound, no waiting room to share,
 * no grant to announce and claim. Same modes, same outcomes.
 */
export async function acquireLocally(
  store: LocalStore,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  if (settings.waitMs > 0) return waitLocally(store, settings, call, token, startedAt);
  for (let count = 0; ; count++) {
    const sentAt = performance.now();
    const reply = store.takeNow(call.kind, call.storeKey, token, call.limit, call.weight, call.leaseMs, call.tenant);
    if (reply.acquired) return acquired(call, store, token, reply, sentAt, startedAt);
    if (count >= settings.retries) return refused(call, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, settings.signal);
    settings.signal?.throwIfAborted();
  }
}

/**
 * Queues as a waiter of this process: a release hands it the permit, with a
 * full lease, from inside the releasing call (which only resolves this
 * promise: the rest runs after it). One shared timer per millisecond bounds
 * `waitMs`.
 */
function waitLocally(
  store: LocalStore,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  const { kind, storeKey, limit, weight, leaseMs } = call;
  const { signal } = settings;
  const until = startedAt + settings.waitMs;
  return new Promise<{ at: number; fence: number } | Refused>((resolve, reject) => {
    let timer: Due | undefined;
    let done = false;
    const end = (): boolean => {
      if (done) return false;
      done = true;
      foregroundTimers.cancel(timer);
      foregroundTimers.cancel(backup);
      if (signal !== undefined) offAbort(signal, aborted);
      return true;
    };
    const aborted = (): void => {
      if (!end()) return;
      store.leaveNow(kind, storeKey, token);
      reject(signal?.reason);
    };
    // A holder whose lease lapses (it stalled, or stopped renewing) frees its permit only when
    // something looks: look when the nearest lease ends, and again then if it was renewed.
    let backup: Due | undefined;
    const lookAt = (retryAfterMs: number): void => {
      backup = foregroundTimers.at(performance.now() + retryAfterMs, () => {
        backup = undefined;
        if (done) return;
        const next = store.settleNow(kind, storeKey);
        if (!done) lookAt(next);
      });
    };
    const sentAt = performance.now();
    const join = {
      leaseMs,
      until,
      maxQueue: settings.maxQueue,
      onGrant: (at: number, fence: number) => {
        if (end()) resolve({ at, fence });
      },
      onClose: (error: Error) => {
        if (end()) reject(error);
      },
    };
    const reply = store.waitNow(kind, storeKey, token, limit, weight, join, call.tenant);
    if (reply.acquired) {
      end();
      resolve({ at: sentAt, fence: reply.fence as number });
      return;
    }
    if (reply.queued !== true) {
      end();
      resolve(refused(call, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt));
      return;
    }
    timer = foregroundTimers.at(until, () => {
      if (!end()) return;
      store.leaveNow(kind, storeKey, token);
      resolve(refused(call, reply, "wait-timeout", startedAt));
    });
    lookAt(reply.retryAfterMs);
    if (signal !== undefined) onAbort(signal, aborted);
  }).then((outcome) => ("at" in outcome ? acquired(call, store, token, outcome, outcome.at, startedAt) : outcome));
}
