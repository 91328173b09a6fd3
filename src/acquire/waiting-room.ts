// The waiting room of one id in this process: what its waiters share (one subscription, one backup
// timer, one periodic refresh). waiting.ts runs one waiter's wait in it.
import { ShutdownError, StorePermissionError } from "../errors/index.js";
import { MAX_MS } from "../options/validate.js";
import type { Grant } from "../store/contract/calls.js";
import type { Store } from "../store/contract/types.js";
import { refreshWaiters, type WaitingCalls, watchGrants } from "./waiting-calls.js";

/**
 * The waiters of this process on one id of one store: they share one
 * subscription to the id's grant channel, one backup timer (to the nearest
 * lease expiry, when a crashed holder's permit frees) and one periodic call
 * that keeps all their waiter leases alive. Nothing here polls per waiter.
 */
export class Room {
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
        // unless the ACL refuses the channel (a configuration to fix, not an outage) or the store is closed.
        if (isFinal(error)) this.#fail(error);
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
          // again. A permission the ACL lacks, or a closed store, would fail every time: the waits end with it now.
          if (isFinal(error)) return this.#fail(error);
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
  #fail(error: StorePermissionError | ShutdownError): void {
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

/** A store error that every later call would meet too: waiting on is pointless. */
const isFinal = (error: unknown): error is StorePermissionError | ShutdownError =>
  error instanceof StorePermissionError || error instanceof ShutdownError;

/**
 * Why a waiter wakes: a grant announced with its fence (start at once if its
 * reservation leaves time enough, else claim); `true`, granted but its fence
 * not known (a refresh said so: claim); `false`, its place lapsed (claim,
 * which joins again).
 */
export type Due = number | boolean;

/** One waiter as its room knows it. */
export interface Waiter {
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

/** The room of this process's waiters on `ops.storeKey` of `store`, made when its first waiter comes. */
export function roomFor(store: Store, ops: WaitingCalls, waiterLeaseMs: number): Room {
  let byId = rooms.get(store);
  if (byId === undefined) {
    byId = new Map();
    rooms.set(store, byId);
  }
  const name = `${ops.kind} ${ops.storeKey}`;
  let room = byId.get(name);
  if (room === undefined) {
    const created = new Room(store, ops, waiterLeaseMs, () => {
      if (byId.get(name) === created) byId.delete(name);
    });
    byId.set(name, created);
    room = created;
  }
  return room;
}
