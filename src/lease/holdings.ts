import { setMaxListeners } from "node:events";
import { ShutdownError } from "../errors/index.js";
import { CLOSE_GRACE_MS } from "../options/defaults.js";
import { CLOSE_OPTIONS } from "../options/lists.js";
import type { CallSettings } from "../options/settings.js";
import type { CloseOptions } from "../options/types.js";
import { delayMs, knownOptions, optionsObject } from "../options/validate.js";
import { offAbort, onAbort } from "../runtime/aborts.js";
import type { StoreSource } from "../store/access/client.js";
import type { LeaseHandle, LeaseOwner } from "./handle.js";
import { AFTER, BEFORE, TRACKED } from "./links.js";

/** The grace of a `close(options)` call: checked like any option, before anything is closed. */
export function graceOf(options: CloseOptions | undefined): number {
  if (options === undefined) return CLOSE_GRACE_MS;
  const given = optionsObject(options, "close");
  knownOptions(given, CLOSE_OPTIONS, "close");
  return given.graceMs === undefined
    ? CLOSE_GRACE_MS
    : delayMs("graceMs", given.graceMs, "Pass how long running work may finish before its permit is taken back, e.g. 10000.");
}

/** An acquisition's settings whose signal also follows the factory's closing, and how to stop following. */
export interface Linked {
  settings: CallSettings;
  unlink(): void;
}

/** Past this many tracked leases, lapsed ones (an `acquire` never released) are forgotten before adding more. */
const SWEEP_FROM = 1024;

/**
 * What one semaphore or lock holds, and how it lets go on `close()`: the
 * leases it handed out and not yet got back, the acquisitions still waiting
 * for an answer, and the signal every acquisition runs under (it aborts with
 * a `ShutdownError` when `close()` begins, which ends waits through their
 * usual path: the waiter leaves its queue before it is rejected).
 *
 * `close()`: refuse new calls, end the waits, tell every holder (each lease's
 * `signal` aborts with a `ShutdownError`), wait until everything came back or
 * the grace ended, then take back what is still held (a holder still at work
 * is told of a loss first) and whatever acquisition in flight still brings
 * back, and close the store if it was leasehold's own.
 */
export class Holdings implements LeaseOwner {
  readonly #controller = new AbortController();
  /**
   * The leases held, linked through their own fields (`LeaseHandle.before`,
   * `after`): a lease joins and leaves in O(1) with no hashing, and a removed
   * one keeps no link to the others (a Set's table links to its successor
   * when rehashed: see runtime/copy-due.ts).
   */
  #first: LeaseHandle | undefined;
  #size = 0;
  /** Acquisitions that did not answer in the turn they began. */
  #acquiring = 0;
  #closing: Promise<void> | undefined;
  /** Ends a wait of `close()` once nothing is held or being acquired. */
  #quiet: (() => void) | undefined;
  #sweepAt = SWEEP_FROM;

  constructor(readonly kind: "semaphore" | "lock") {
    // Every waiting call listens to it: many listeners are expected, not a leak.
    setMaxListeners(0, this.#controller.signal);
  }

  /** Aborts with a `ShutdownError` when `close()` begins: the signal of every call that passes none. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Throws the `ShutdownError` once `close()` has been called. */
  refuse(): void {
    if (this.#closing !== undefined) throw this.#controller.signal.reason;
  }

  /**
   * For a call that passed its own signal and may wait (queue or spin): its
   * settings with a signal that aborts on either that one or `close()`; call
   * `unlink` when the acquisition ends, so that neither signal keeps a
   * listener for it. Undefined for the others: a call without a signal runs
   * under the factory's, and one that fails fast is refused by `adopt` if
   * `close()` began while it was in flight.
   */
  follow(settings: CallSettings): Linked | undefined {
    const own = settings.signal;
    const closing = this.#controller.signal;
    if (own === undefined || own === closing || (settings.waitMs === 0 && settings.retries === 0)) return undefined;
    const controller = new AbortController();
    const fromOwn = (): void => controller.abort(own.reason);
    const fromClosing = (): void => controller.abort(closing.reason);
    if (own.aborted) fromOwn();
    else own.addEventListener("abort", fromOwn, { once: true });
    onAbort(closing, fromClosing);
    return {
      settings: { ...settings, signal: controller.signal },
      unlink: () => {
        own.removeEventListener("abort", fromOwn);
        offAbort(closing, fromClosing);
      },
    };
  }

  /** An acquisition will answer later: `close()` waits for it (its lease, if any, is taken back). */
  started(): void {
    this.#acquiring++;
  }

  /** That acquisition answered (after `adopt`, when it brought a lease). */
  ended(linked: Linked | undefined): void {
    linked?.unlink();
    this.#acquiring--;
    this.#settle();
  }

  /**
   * Tracks a lease just had. Once closing, nobody gets it: it is given back at
   * once and the call is refused with the `ShutdownError`.
   */
  adopt<L extends LeaseHandle>(lease: L): L {
    lease.owner = this;
    this.#track(lease);
    if (this.#closing !== undefined) {
      const forget = (): void => this.released(lease);
      lease.giveBackUnheld().then(forget, forget);
      throw new ShutdownError(this.kind, lease.key);
    }
    if (this.#size >= this.#sweepAt) this.#sweep();
    return lease;
  }

  /** A lease was given back (its store answered the release, either way). */
  released(lease: LeaseHandle): void {
    this.#forget(lease);
    this.#settle();
  }

  #track(lease: LeaseHandle): void {
    if (lease[TRACKED]) return;
    lease[TRACKED] = true;
    const first = this.#first;
    lease[AFTER] = first;
    if (first !== undefined) first[BEFORE] = lease;
    this.#first = lease;
    this.#size++;
  }

  #forget(lease: LeaseHandle): void {
    if (!lease[TRACKED]) return;
    lease[TRACKED] = false;
    const before = lease[BEFORE];
    const after = lease[AFTER];
    if (before !== undefined) before[AFTER] = after;
    else this.#first = after;
    if (after !== undefined) after[BEFORE] = before;
    lease[BEFORE] = undefined;
    lease[AFTER] = undefined;
    this.#size--;
  }

  /** The leases held now, newest first. */
  #leases(): LeaseHandle[] {
    const leases: LeaseHandle[] = [];
    for (let lease = this.#first; lease !== undefined; lease = lease[AFTER]) leases.push(lease);
    return leases;
  }

  /** Closes once; a second call returns the same promise. A bad option rejects without closing. */
  close(options: CloseOptions | undefined, source: StoreSource): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    let graceMs: number;
    try {
      graceMs = graceOf(options);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#closing = this.#shutDown(graceMs, source);
    return this.#closing;
  }

  async #shutDown(graceMs: number, source: StoreSource): Promise<void> {
    // New calls are refused from here on, and every wait ends: its waiter leaves the queue first.
    this.#controller.abort(new ShutdownError(this.kind));
    // A holder told here may give back another lease at once: that one is not told.
    for (const lease of this.#leases()) if (lease[TRACKED]) lease.interrupt(new ShutdownError(this.kind, lease.key));
    await this.#quietOr(graceMs);
    for (const lease of this.#leases()) this.#takeBack(lease);
    // Take-backs, and acquisitions still in flight (each bounded by the store's timeout), to the last.
    await this.#quietOr(undefined);
    await source.close();
  }

  /**
   * A lease still held when the grace ended. One whose work goes on is lost
   * (its holder is told, with the `ShutdownError` as the cause), then released;
   * one already on its way back (`run`'s body settled, or a release in flight)
   * is only waited for, or released once more if its own release failed.
   */
  #takeBack(lease: LeaseHandle): void {
    const pending = lease.releasing;
    if (pending !== undefined) {
      pending.then(
        () => this.released(lease),
        () => this.#giveBack(lease),
      );
      return;
    }
    if (!lease.finishing) lease.lose(lease.interrupted);
    this.#giveBack(lease);
  }

  /** Releases `lease` and forgets it either way: a release the store does not answer lapses with the lease. */
  #giveBack(lease: LeaseHandle): void {
    const forget = (): void => this.released(lease);
    lease.release().then(forget, forget);
  }

  /** Resolves once nothing is held or being acquired, or after `ms` (a timer that keeps the process alive: closing is work to finish). */
  #quietOr(ms: number | undefined): Promise<void> {
    if (this.#idle()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(() => done(), ms);
      const done = (): void => {
        clearTimeout(timer);
        this.#quiet = undefined;
        resolve();
      };
      this.#quiet = done;
    });
  }

  #idle(): boolean {
    return this.#acquiring === 0 && this.#size === 0;
  }

  #settle(): void {
    if (this.#quiet !== undefined && this.#idle()) this.#quiet();
  }

  /** Forgets leases that lapsed without being given back (an `acquire` whose holder never released it). */
  #sweep(): void {
    const now = performance.now();
    for (const lease of this.#leases()) {
      if (now >= lease.deadline && lease.releasing === undefined) this.#forget(lease);
    }
    this.#sweepAt = Math.max(SWEEP_FROM, this.#size * 2);
  }
}
