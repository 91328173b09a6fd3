import { offAbort, onAbort } from "./aborts.js";
import { StorePermissionError } from "./errors.js";
import type { AcquireReply, Grant, QueueOptions, Store } from "./store/types.js";
import { leave, leaveIfTaken } from "./store-call.js";
import { MAX_MS } from "./validate.js";
import { claim, refreshWaiters, type WaitingCalls, watchGrants } from "./waiting-calls.js";

/**
 * The waiters of this process on one id of one store: they share one
 * subscription to the id's grant channel, one backup timer (to the nearest
 * lease expiry, when a crashed holder's permit frees) and one periodic call
 * that keeps all their waiter leases alive. Nothing here polls per waiter.
 */
class Room {
  readonly #waiters = new Map<string, Waiter>();
  #stopWatching: (() => void) | undefined;
  #backup: NodeJS.Timeout | undefined;
  #backupAt = Number.POSITIVE_INFINITY;
  #refreshTimer: NodeJS.Timeout | undefined;
  #refreshing = false;
  // Until the first refresh after subscribing has answered, announced grants are held back:
  // grants announced before the subscription were missed and only that refresh reveals them,
  // so waking the announced ones at once would let a later grant start before earlier ones.
  #priming = true;
  /** Grants announced while priming: token, fence. */
  readonly #announced = new Map<string, number>();
  /**
   * The latest grants heard for tokens not waiting here: token, fence. A join's reply can reach
   * its waiter after the grant that followed it on the server was heard (in another call's reply,
   * or over pub/sub): that waiter finds its grant here on arrival, instead of at the next refresh.
   * Most are other processes' tokens; only the newest are kept.
   */
  readonly #heard = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly ops: WaitingCalls,
    private readonly waiterLeaseMs: number,
    private readonly onEmpty: () => void,
  ) {}

  add(token: string, waiter: Waiter): void {
    const first = this.#waiters.size === 0;
    this.#waiters.set(token, waiter);
    const fence = this.#heard.get(token);
    if (fence !== undefined) {
      this.#heard.delete(token);
      if (this.#priming) this.#announced.set(token, fence);
      else queueMicrotask(() => this.#waiters.get(token)?.wake(fence));
    }
    if (!first) return;
    watchGrants(this.store, this.ops, (grant) => this.#granted(grant)).then(
      (stop) => {
        if (this.#waiters.size === 0) {
          stop();
          return;
        }
        this.#stopWatching = stop;
        // A grant announced before we listened would be missed: ask once.
        this.refreshAll(true);
      },
      (error: unknown) => {
        // No notifications: the backup timer and the refresh keep waiting correct, only slower;
        // unless the ACL refuses the channel, which is a configuration to fix, not an outage.
        if (error instanceof StorePermissionError) this.#fail(error);
      },
    );
    this.#refreshTimer = setInterval(() => this.refreshAll(), Math.max(20, Math.floor(this.waiterLeaseMs / 3)));
    this.#refreshTimer.unref();
  }

  remove(token: string): void {
    this.#waiters.delete(token);
    if (this.#waiters.size > 0) return;
    this.#stopWatching?.();
    this.#stopWatching = undefined;
    clearInterval(this.#refreshTimer);
    clearTimeout(this.#backup);
    this.#backupAt = Number.POSITIVE_INFINITY;
    this.onEmpty();
  }

  /** Wakes everyone at the nearest moment a lease may lapse (a crashed holder frees nothing by itself). */
  backupIn(requestedMs: number): void {
    // A store's delay beyond what a timer holds would fire at once, again and again.
    const ms = Math.min(requestedMs, MAX_MS - 1);
    const at = performance.now() + ms;
    if (at >= this.#backupAt) return;
    clearTimeout(this.#backup);
    this.#backupAt = at;
    this.#backup = setTimeout(
      () => {
        this.#backupAt = Number.POSITIVE_INFINITY;
        this.refreshAll();
      },
      Math.max(1, Math.ceil(ms) + 1),
    );
    this.#backup.unref();
  }

  /**
   * One call for all local waiters: keeps their leases, grants who fits, and
   * wakes the granted and the lost, in the order they joined. `priming`: the
   * first refresh after subscribing, which runs even if another is in flight
   * and then releases the grants announced meanwhile.
   */
  refreshAll(priming = false): void {
    if (this.#waiters.size === 0 || (this.#refreshing && !priming)) {
      if (priming) this.#endPriming(new Map());
      return;
    }
    this.#refreshing = true;
    const tokens = [...this.#waiters.keys()];
    const sentAt = performance.now();
    refreshWaiters(this.store, this.ops, tokens, this.waiterLeaseMs)
      .then(
        ({ statuses, fences, retryAfterMs }) => {
          const due = new Map<string, Due>();
          let waiting = false;
          statuses.forEach((status, i) => {
            const token = tokens[i] as string;
            if (status === "waiting") {
              waiting = true;
              // Its waiter lease now runs until at least sentAt + waiterLeaseMs on the store's clock.
              const waiter = this.#waiters.get(token);
              if (waiter !== undefined) waiter.anchor = Math.max(waiter.anchor, sentAt);
            } else {
              // "held": granted, with its fence. "gone": our waiter lease lapsed (a long stall); claiming re-joins the queue.
              due.set(token, status === "held" ? (fences[i] as number) : false);
            }
          });
          if (priming) this.#endPriming(due);
          else this.#wake(due);
          // A grant announced before this room listened (or lost with a dropped subscription)
          // to a waiter that never claims it frees its permits when its reservation lapses:
          // the nearest lease end includes that reservation, so look again then. (1 means nothing
          // is held: waiting then has another cause, and looking again at once would spin.)
          if (waiting && retryAfterMs > 1) this.backupIn(retryAfterMs);
        },
        (error: unknown) => {
          // Failed, timed out or answered nonsense (a store error, published): the next refresh tries
          // again. A permission the ACL lacks would fail every time: the waits end with it now.
          if (error instanceof StorePermissionError) return this.#fail(error);
          if (priming) this.#endPriming(new Map());
        },
      )
      .finally(() => {
        this.#refreshing = false;
      });
  }

  #endPriming(due: Map<string, Due>): void {
    this.#priming = false;
    for (const [token, fence] of this.#announced) due.set(token, fence);
    this.#announced.clear();
    this.#wake(due);
  }

  /** Ends every wait of this room with `error`. */
  #fail(error: StorePermissionError): void {
    for (const waiter of [...this.#waiters.values()]) waiter.fail(error);
  }

  /** Wakes these waiters in the order they joined. */
  #wake(tokens: Map<string, Due>): void {
    for (const [token, waiter] of [...this.#waiters]) {
      const due = tokens.get(token);
      if (due !== undefined) waiter.wake(due);
    }
  }

  #granted(grant: Grant): void {
    grant.tokens.forEach((token, i) => {
      const fence = grant.fences[i] as number;
      const waiter = this.#waiters.get(token);
      if (waiter === undefined) this.#heard.set(token, fence);
      else if (!this.#priming) waiter.wake(fence);
      else this.#announced.set(token, fence);
    });
    for (const token of this.#heard.keys()) {
      if (this.#heard.size <= HEARD_KEPT) break;
      this.#heard.delete(token);
    }
    // A grant to a waiter that never claims (its process died) lapses after its reservation:
    // look again then, or this room would wait for the next lease expiry.
    this.backupIn(grant.waiterLeaseMs);
  }
}

/**
 * Why a waiter wakes: a grant announced with its fence (start at once if its
 * reservation leaves time enough, else claim); `true`, granted but its fence
 * not known (a refresh said so: claim); `false`, its place lapsed (claim,
 * which joins again).
 */
type Due = number | boolean;

/** One waiter as its room knows it. */
interface Waiter {
  /** Claim (or, granted with its fence and time enough, start at once). */
  wake(due: Due): void;
  /** End the wait with an error no retry can mend. */
  fail(error: unknown): void;
  /**
   * The send time of the latest call the store answered "still waiting" for
   * this token (the join, a claim, a refresh): its waiter lease, and so any
   * grant's reservation, runs until at least this + waiterLeaseMs on the store's clock.
   */
  anchor: number;
}

/**
 * Grants heard for tokens a room does not know that it keeps: a join's reply trails its grant by
 * a few calls at most, while the grants of other processes' waiters pass by.
 */
const HEARD_KEPT = 256;

const rooms = new WeakMap<Store, Map<string, Room>>();

function roomFor(wait: Wait): Room {
  let byId = rooms.get(wait.store);
  if (byId === undefined) {
    byId = new Map();
    rooms.set(wait.store, byId);
  }
  const name = `${wait.ops.kind} ${wait.ops.key}`;
  let room = byId.get(name);
  if (room === undefined) {
    const created = new Room(wait.store, wait.ops, wait.queue.waiterLeaseMs, () => {
      if (byId.get(name) === created) byId.delete(name);
    });
    byId.set(name, created);
    room = created;
  }
  return room;
}

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

/** Redis reads its clock in whole milliseconds (see lease.ts). */
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
  const room = roomFor(wait);
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
