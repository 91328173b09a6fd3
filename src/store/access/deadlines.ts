// The time bound of store round trips (see `bounded` in bounded.ts), kept per store as the calls
// in flight in the order they were sent. A Node timer and a `Promise.race` per round trip cost
// more than the rest of a coalesced call; calls of one store under
// the same bound end in the order they were sent, so one timer per store, armed for the oldest
// call still out, bounds them all.
import { STORE_TIMEOUT_MS } from "../../options/defaults.js";
import { MAX_MS } from "../../options/validate.js";
import type { Store } from "../contract/types.js";

/** One call in flight: when it times out, and what to do then. */
export interface InFlight {
  readonly at: number;
  readonly expire: () => void;
  /** Answered, or timed out: whichever came first is the only one heard. */
  done: boolean;
  /** A call out of order with the others (given less than the whole bound) has a timer of its own. */
  timer: NodeJS.Timeout | undefined;
}

/** Entries kept at most past the head before the queue is cut down (amortised O(1) per call). */
const COMPACT_FROM = 1024;

/**
 * The deadlines of one store's calls in flight: one Node timer, however many calls are out.
 *
 * @example
 * ```ts
 * const entry = deadlinesOf(store).add(performance.now() + 2000, () => reject(timedOut()));
 * pending.then((reply) => deadlinesOf(store).settle(entry) && resolve(reply));
 * ```
 */
export class Deadlines {
  /** Calls in the order sent, so by deadline; `#head` is the oldest that may still be out. */
  #queue: InFlight[] = [];
  #head = 0;
  /** Armed for the head's deadline, or an earlier one (it then arms again): at most one per `bound`. */
  #timer: NodeJS.Timeout | undefined;
  /** When `#timer` fires (performance.now() clock). */
  #armedAt = 0;

  /**
   * Bounds a call: `expire` runs at `at` (on the `performance.now()` clock) or just after, unless
   * `settle` comes first.
   */
  add(at: number, expire: () => void): InFlight {
    const queue = this.#queue;
    const last = queue.length > this.#head ? (queue[queue.length - 1] as InFlight) : undefined;
    const entry: InFlight = { at, expire, done: false, timer: undefined };
    if (last !== undefined && at < last.at) {
      // Earlier than a call already out (a wait's last call, given what is left of the bound): the
      // queue would no longer be in deadline order, so this one has its own timer.
      entry.timer = setTimeout(
        () =>
          setImmediate(() => {
            if (entry.done) return;
            entry.done = true;
            expire();
          }),
        Math.max(1, Math.ceil(at - performance.now())),
      );
      return entry;
    }
    queue.push(entry);
    if (this.#timer === undefined) this.#arm(at);
    else if (at < this.#armedAt) {
      // The timer is left from calls all answered, armed for a later deadline than this one's (a
      // call given less than the whole bound): it would bound this call late.
      clearTimeout(this.#timer);
      this.#arm(at);
    }
    // A call out keeps the process alive until it is answered or times out, as its own timer did.
    else if (queue.length - this.#head === 1) this.#timer.ref();
    return entry;
  }

  /** The call answered: true if it is the first to be heard (it had not timed out). */
  settle(entry: InFlight): boolean {
    if (entry.done) return false;
    entry.done = true;
    if (entry.timer !== undefined) {
      clearTimeout(entry.timer);
      return true;
    }
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length && (queue[head] as InFlight).done) head++;
    if (head === queue.length) {
      queue.length = 0;
      this.#head = 0;
      // Nothing out: the timer, still armed for the next deadline check, no longer holds the process.
      this.#timer?.unref();
    } else if (head >= COMPACT_FROM && head * 2 >= queue.length) {
      this.#queue = queue.slice(head);
      this.#head = 0;
    } else {
      this.#head = head;
    }
    return true;
  }

  #arm(at: number): void {
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(1, Math.ceil(at - performance.now())));
  }

  /** Times out every call whose deadline has passed, then arms for the oldest call still out. */
  #fire(): void {
    this.#timer = undefined;
    const now = performance.now();
    const queue = this.#queue;
    const expired: InFlight[] = [];
    let head = this.#head;
    for (; head < queue.length; head++) {
      const entry = queue[head] as InFlight;
      if (entry.done) continue;
      // Node may fire a timer a fraction early against performance.now(): the rest waits.
      if (entry.at > now) break;
      expired.push(entry);
    }
    if (head === queue.length) {
      queue.length = 0;
      this.#head = 0;
    } else {
      this.#head = head;
      this.#arm((queue[head] as InFlight).at);
    }
    if (expired.length === 0) return;
    // Heard after the I/O of this turn: a reply that arrived while the process could not run (a long
    // GC pause, a blocked event loop) is read before the timers of the same turn declare it missing.
    // Without this, every call out during a stall longer than the bound timed out, and the store was
    // taken down for a pause of its own process.
    setImmediate(() => {
      // After the queue is consistent: an expiry may send a clean-up call, which is bounded here too.
      for (const entry of expired)
        if (!entry.done) {
          entry.done = true;
          entry.expire();
        }
    });
  }
}

const perStore = new WeakMap<object, Deadlines>();

/** The deadlines of one store's round trips. */
export function deadlinesOf(store: object): Deadlines {
  let deadlines = perStore.get(store);
  if (deadlines === undefined) {
    deadlines = new Deadlines();
    perStore.set(store, deadlines);
  }
  return deadlines;
}

/**
 * A duration a store declares about itself, or `fallback` when it declares
 * none or one a timer cannot hold (a custom store's `Infinity` or `"5s"`
 * would make every timer built on it fire at once).
 */
export function declaredMs(store: Store, property: "timeoutMs" | "waiterLeaseMs", fallback: number): number {
  const own = (store as { timeoutMs?: unknown; waiterLeaseMs?: unknown })[property];
  return typeof own === "number" && own >= 1 && own <= MAX_MS ? own : fallback;
}

/** The longest one round trip to `store` may take: what it declares, else 2 s (the breaker's probe and every call alike). */
export function declaredTimeoutMs(store: Store): number {
  return declaredMs(store, "timeoutMs", STORE_TIMEOUT_MS);
}
