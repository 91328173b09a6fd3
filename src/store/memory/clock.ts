/**
 * Where the embedded store reads the time and sets its clean-up timers: the
 * process's monotonic clock by default; the model-based suite passes a clock
 * it advances itself, so that a failing case replays exactly (as lua/lib/clock.lua
 * can be swapped for a clock the suite sets).
 */
export interface MemoryClock {
  now(): number;
  /**
   * Where fences start: a clock in whole microseconds that never goes back
   * within the process (see `fence` in the Store contract).
   */
  micros(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

// Read once: `performance.timeOrigin` is a getter that costs a call into Node on every read.
const origin = performance.timeOrigin;

export const processClock: MemoryClock = {
  now: () => performance.now(),
  // Wall time at the process's start plus monotonic time since: it never goes back within the
  // process, and a restarted process starts past every fence its predecessor gave (as Redis's TIME).
  micros: () => Math.floor((origin + performance.now()) * 1000),
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * The clock's `micros()` at `now`, a reading of its `now()` the step already
 * made: on the process clock, derived from it rather than read again (a read
 * is a call into Node, and a grant would make two). Still never behind an
 * earlier grant's: a fence is past the id's last whatever the clock says.
 */
export function microsAt(clock: MemoryClock, now: number | undefined): number {
  return clock === processClock && now !== undefined ? Math.floor((origin + now) * 1000) : clock.micros();
}

/** Whole ms until `at`, at least 1 (and 1 when nothing is due). */
export function untilMs(at: number, now: number): number {
  return Number.isFinite(at) ? Math.max(1, Math.ceil(at - now)) : 1;
}

/** The latest lease end among entries (0: none). */
export function latestOf(entries: Iterable<{ expiresAt: number }>): number {
  let latest = 0;
  for (const entry of entries) if (entry.expiresAt > latest) latest = entry.expiresAt;
  return latest;
}
