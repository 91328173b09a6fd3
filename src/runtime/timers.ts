import { copyDue } from "./copy-due.js";

/**
 * Timers shared by everything due in the same millisecond: one Node timer per
 * millisecond that has something due, however many callers wait for it. A
 * process admitting hundreds of thousands of calls a second would otherwise
 * create and clear a Node timer per call (for `waitMs`, for a lease's next
 * renewal tick), which costs more than the rest of an in-memory acquire.
 *
 * A callback runs at the earliest in the millisecond it asked for, never
 * before; callbacks of one millisecond run in the order they were added.
 */
export class SharedTimers {
  /** Copied now and then (see copy-due.ts). */
  #buckets = new Map<number, { timer: NodeJS.Timeout; due: Set<Due> }>();
  #emptied = 0;
  /** Callbacks to arm at the end of this turn (see `soon`), and how many of them were dropped since. */
  #soon: Soon[] = [];
  #dropped = 0;
  #arming = false;
  readonly #armSoon = (): void => this.#armAll();

  /** `ref`: whether a pending callback keeps the process alive (as a `waitMs` should; renewals should not). */
  constructor(private readonly ref: boolean) {}

  /** Runs `callback` at `at` (on the `performance.now()` clock) or just after; returns what `cancel` takes. */
  at(at: number, callback: () => void): Due {
    const ms = Math.ceil(at);
    let bucket = this.#buckets.get(ms);
    if (bucket === undefined) {
      const due = new Set<Due>();
      const timer = setTimeout(() => this.#fire(ms), Math.max(1, ms - performance.now()));
      if (!this.ref) timer.unref();
      bucket = { timer, due };
      this.#buckets.set(ms, bucket);
    }
    const entry: Due = { ms, callback };
    bucket.due.add(entry);
    return entry;
  }

  cancel(entry: Due | undefined): void {
    if (entry === undefined) return;
    const bucket = this.#buckets.get(entry.ms);
    if (bucket === undefined || !bucket.due.delete(entry)) return;
    if (bucket.due.size === 0) {
      clearTimeout(bucket.timer);
      this.#forget(entry.ms);
    }
  }

  /**
   * `at`, armed at the end of this turn (one `setImmediate` for all of the
   * turn's) unless dropped by then: a caller that is served, or a body that
   * ends, in the turn it began (the embedded store's usual case) never
   * touches a timer. The callback still runs at `at` or just after (at once
   * if `at` passed meanwhile): only the bookkeeping moves, never the time.
   */
  soon(at: number, callback: () => void): Soon {
    const entry: Soon = { at, callback, due: undefined, off: false };
    const list = this.#soon;
    list.push(entry);
    if (!this.#arming) {
      this.#arming = true;
      // Never unref'd, even for background timers: Node runs an unref'd immediate only once some
      // other callback wakes a loop blocked in poll, so a lease's first tick could be armed after
      // the lease had lapsed. Keeping the process alive for one more turn costs nothing.
      setImmediate(this.#armSoon);
    } else if (this.#dropped >= 256 && this.#dropped * 2 >= list.length) {
      // A turn that never ends (callers served in microtasks, one after another) drops what it adds: keep the list short.
      this.#soon = list.filter((kept) => !kept.off);
      this.#dropped = 0;
    }
    return entry;
  }

  /** Drops a callback of `soon`: its timer, if armed already, is cancelled. */
  drop(entry: Soon | undefined): void {
    if (entry === undefined || entry.off) return;
    entry.off = true;
    if (entry.due !== undefined) this.cancel(entry.due);
    else {
      // Until the list is next compacted, it holds the entry, not what its callback would keep alive.
      entry.callback = noop;
      this.#dropped++;
    }
  }

  #armAll(): void {
    const list = this.#soon;
    this.#soon = [];
    this.#dropped = 0;
    this.#arming = false;
    for (const entry of list) if (!entry.off) entry.due = this.at(entry.at, entry.callback);
  }

  #fire(ms: number): void {
    const bucket = this.#buckets.get(ms);
    if (bucket === undefined) return;
    // Node may fire a timer a fraction early against performance.now(): wait out the rest.
    const early = ms - performance.now();
    if (early > 0) {
      bucket.timer = setTimeout(() => this.#fire(ms), Math.ceil(early));
      if (!this.ref) bucket.timer.unref();
      return;
    }
    this.#forget(ms);
    for (const entry of bucket.due) entry.callback();
  }

  #forget(ms: number): void {
    this.#buckets.delete(ms);
    if (copyDue(++this.#emptied, this.#buckets.size)) {
      this.#emptied = 0;
      this.#buckets = new Map(this.#buckets);
    }
  }
}

/** One pending callback of {@link SharedTimers}. */
export interface Due {
  readonly ms: number;
  readonly callback: () => void;
}

const noop = (): void => {};

/** A callback of {@link SharedTimers.soon}: `due` once armed, `off` once dropped. */
export interface Soon {
  readonly at: number;
  callback: () => void;
  due: Due | undefined;
  off: boolean;
}

/** Timers that do not keep the process alive: renewal ticks, deadlines. */
export const backgroundTimers = new SharedTimers(false);
/** Timers that do: a caller waiting for its turn (`waitMs`) is work the process has to finish. */
export const foregroundTimers = new SharedTimers(true);
