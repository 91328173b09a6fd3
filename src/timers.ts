import { copyDue } from "./churn.js";

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
  /** Copied now and then (see churn.ts). */
  #buckets = new Map<number, { timer: NodeJS.Timeout; due: Set<Due> }>();
  #emptied = 0;

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

/** Timers that do not keep the process alive: renewal ticks, deadlines. */
export const backgroundTimers = new SharedTimers(false);
/** Timers that do: a caller waiting for its turn (`waitMs`) is work the process has to finish. */
export const foregroundTimers = new SharedTimers(true);
