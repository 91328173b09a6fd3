import { StorePermissionError } from "../errors/index.js";
import { offAbort, onAbort } from "../runtime/aborts.js";
import { leave, leaveIfTaken } from "../store/access/bounded.js";
import type { QueueOptions } from "../store/contract/calls.js";
import type { AcquireReply, Store } from "../store/contract/types.js";
import { claim, type WaitingCalls } from "./waiting-calls.js";
import { type Due, roomFor, type Waiter } from "./waiting-room.js";

/** Why a wait ended without a lease. */
export class WaitEnded {
  constructor(
    readonly reason: "wait-timeout" | "queue-full",
    readonly retryAfterMs: number,
  ) {}
}

export interface Wait {
  store: Store;
  /** The calls on the key; its kind and store key name the room. */
  ops: WaitingCalls;
  token: string;
  /** What the join sent: claims send it again. */
  queue: QueueOptions;
  /** When `waitMs` runs out, on the `performance.now()` clock. */
  deadline: number;
  signal: AbortSignal | undefined;
  retryAfterMs: number;
  /** When the join that queued this token was sent. */
  joinedAt: number;
}

/**
 * How a wait ended with a lease, and its fence: claimed (`sentAt` of the
 * winning claim: the lease runs a full lease from then), or handed off
 * (`until`: a grant is known, reserved until at least then, and the lease is
 * to be confirmed with an extend while its holder already works).
 */
export type Granted = ({ sentAt: number } | { until: number }) & { fence: number };

/**
 * A grant hands off without a claim round trip only while at least this share
 * of the waiter lease is left of its reservation: the confirming extend then
 * has time to land. A live waiter's process refreshes it every third, so it
 * always has about two thirds left.
 */
const HAND_OFF_SHARE = 1 / 3;

/** Redis reads its clock in whole milliseconds (see lease/handle.ts). */
const CLOCK_GRAIN_MS = 1;

const ignore = (): void => {};

/**
 * Waits in the queue the first acquire joined, until the store grants this
 * token its permits, the wait expires (rejects with `WaitEnded`), or `signal`
 * aborts (rejects with its reason). A grant heard while the reservation it
 * implies is long enough resolves at once (`until`), without a claim round
 * trip: the grant cannot be older than the latest call the store answered
 * "still waiting", so that call's send time plus the waiter lease is a lower
 * bound of the reservation's end, whatever the store's clock says. Otherwise
 * the waiter claims first (resolves with the claim's `sentAt`). A waiter that gives up leaves the queue, returning any grant
 * it had not claimed, before the promise settles, but waits for that leave
 * at most one store timeout past the deadline.
 */
export function waitForGrant(wait: Wait): Promise<Granted> {
  const { store, ops, token } = wait;
  const room = roomFor(store, ops, wait.queue.waiterLeaseMs);
  const waiterLeaseMs = wait.queue.waiterLeaseMs;
  return new Promise<Granted>((resolve, reject) => {
    let done = false;
    let claiming = false;
    let wakeAgain = false;
    let retryAfterMs = wait.retryAfterMs;
    // Claims the store has not answered yet, timed-out ones included: one may still take a permit.
    const unanswered = new Set<Promise<AcquireReply>>();

    const settle = (outcome: Granted | { error: unknown }): void => {
      if (done) return;
      done = true;
      clearTimeout(expiry);
      if (wait.signal !== undefined) offAbort(wait.signal, aborted);
      room.remove(token);
      if (!("error" in outcome)) {
        resolve(outcome);
        return;
      }
      // Nobody will use this token now: a claim answered after the leave below is given back too.
      for (const answer of unanswered) leaveIfTaken(store, ops, token, answer);
      // Leave before reporting, so a grant that raced the give-up is returned, not leaked. Its time
      // counts from the deadline: a store that does not answer delays the report by at most one
      // timeout, and the waiter lease (or a grant's reservation) then lapses on its own.
      leave(store, ops, token, Math.max(0, performance.now() - wait.deadline))
        .catch(ignore)
        .finally(() => reject(outcome.error));
    };
    const waiter: Waiter = { wake: (due) => wake(due), fail: (error) => settle({ error }), anchor: wait.joinedAt };
    const wakeIfAsked = (): void => {
      if (!wakeAgain) return;
      wakeAgain = false;
      wake(false);
    };
    const wake = (due: Due): void => {
      if (done) return;
      if (typeof due === "number" && !claiming) {
        const until = waiter.anchor + waiterLeaseMs - CLOCK_GRAIN_MS;
        if (until - performance.now() >= waiterLeaseMs * HAND_OFF_SHARE) {
          settle({ until, fence: due });
          return;
        }
      }
      if (claiming) {
        wakeAgain = true;
        return;
      }
      claiming = true;
      const sentAt = performance.now();
      const { reply, answer } = claim(store, ops, token, wait.queue);
      unanswered.add(answer);
      answer.then(
        () => unanswered.delete(answer),
        () => unanswered.delete(answer),
      );
      reply.then(
        (reply) => {
          claiming = false;
          if (reply.acquired) return settle({ sentAt, fence: reply.fence as number });
          if (reply.queued === true) waiter.anchor = Math.max(waiter.anchor, sentAt);
          retryAfterMs = reply.retryAfterMs;
          if (reply.queueFull === true) return settle({ error: new WaitEnded("queue-full", retryAfterMs) });
          room.backupIn(retryAfterMs);
          wakeIfAsked();
        },
        (error: unknown) => {
          // A failed or timed-out claim leaves nothing and releases nothing: the token keeps its place
          // (and any grant stays reserved for it), and the next wake-up (grant, backup, refresh) claims
          // again; unless the ACL refused it, which no retry mends.
          claiming = false;
          if (error instanceof StorePermissionError) return settle({ error });
          wakeIfAsked();
        },
      );
    };
    const aborted = (): void => settle({ error: wait.signal?.reason });
    const expiry = setTimeout(
      () => settle({ error: new WaitEnded("wait-timeout", retryAfterMs) }),
      Math.max(1, wait.deadline - performance.now()),
    );

    if (wait.signal?.aborted) return aborted();
    if (wait.signal !== undefined) onAbort(wait.signal, aborted);
    room.add(token, waiter);
    room.backupIn(retryAfterMs);
  });
}
