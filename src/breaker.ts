import type { StoreSource } from "./client.js";
import { ShutdownError, StoreUnavailableError } from "./errors.js";
import { channels, type StoreDownEvent, type StoreUpEvent } from "./events.js";
import { isMemoryStore } from "./store/memory.js";
import type { Store } from "./store/types.js";

/**
 * Whether a store answers, as this process has seen it: `up`, or `down`
 * since a call failed to reach it, with when the next probe goes out.
 */
export interface StoreHealth {
  state: "up" | "down";
  /** The store's kind (`"redis"`, `"memory"`, a custom store's). */
  store: string;
  /** While down: ms since the first failure. */
  downForMs?: number;
  /** While down: ms until the next probe (what a refused caller's `Retry-After` says). */
  nextProbeInMs?: number;
  /** While down: the failure that took it down, or the last probe's. */
  lastError?: Error;
}

/** How long the first probe waits after a failure; each failed probe doubles it, up to the most. */
const FIRST_PROBE_MS = 250;
const MOST_PROBE_MS = 2000;

/**
 * Error replies that mean "the server is there but cannot serve now": they
 * take the store down like a refused connection. Any other error reply (a
 * script error, OOM at maxmemory, a missing permission) is an answer: the
 * store is up, and the call alone fails.
 */
const UNAVAILABLE_REPLIES = /^(LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY)\b/;
/** What Redis error replies look like, from any client: an upper-case code, then the text. */
const ERROR_REPLY = /^[A-Z][A-Z_-]+\b/;

/** True when `error` says the store could not be reached (a timeout, a closed or refused connection), not that it answered. */
export function unreachable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError && error.unreachable) return true;
  // A closed store refuses: it is not down.
  if (error instanceof ShutdownError) return false;
  const cause = error instanceof StoreUnavailableError ? error.cause : error;
  if (cause === undefined || (cause instanceof Error && cause.name === "UnexpectedReply")) return false;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (UNAVAILABLE_REPLIES.test(message)) return true;
  return !ERROR_REPLY.test(message);
}

/** A store that is down: since when, why, and its next probe. */
interface Down {
  since: number;
  error: Error;
  probeAt: number;
  interval: number;
  timer: NodeJS.Timeout;
}

/**
 * A circuit breaker around one store, as cockatiel and opossum build them,
 * made for this store: after a call fails to reach it, new acquires and
 * reads fail at once (no caller waits out the store's timeout) until a probe
 * answers. One probe at a time, on a doubling backoff (250 ms up to 2 s),
 * sent by leasehold itself: a cheap read of the last id a caller used, so it
 * needs no permission beyond the prefix's. Renewals, releases and leaves are
 * never held back (a held lease keeps its loss detection exactly as before),
 * and any of them that succeeds brings the store back up at once.
 */
export class Breaker {
  #down: Down | undefined;
  /** The last id a caller used: what the probe reads. */
  #probeKind: "semaphore" | "lock" = "semaphore";
  #probeKey: string | undefined;

  constructor(private readonly store: Store) {}

  /** Throws the fast refusal while down; else remembers `key` as the next probe's target. */
  admit(kind: "semaphore" | "lock", key: string): void {
    const down = this.#down;
    if (down !== undefined) throw this.#refusal(down);
    this.#probeKind = kind;
    this.#probeKey = key;
  }

  /** A call answered: the store is up. */
  answered(): void {
    const down = this.#down;
    if (down === undefined) return;
    clearTimeout(down.timer);
    this.#down = undefined;
    if (channels.storeUp.hasSubscribers) {
      channels.storeUp.publish({ store: this.store.kind, downMs: performance.now() - down.since } satisfies StoreUpEvent);
    }
  }

  /** A call failed: if it did not reach the store, the store is down from now until a probe answers. */
  failed(error: unknown): void {
    if (this.#down !== undefined || !unreachable(error)) return;
    const now = performance.now();
    this.#down = {
      since: now,
      error: error instanceof Error ? error : new Error(String(error)),
      probeAt: now + FIRST_PROBE_MS,
      interval: FIRST_PROBE_MS,
      timer: this.#schedule(FIRST_PROBE_MS),
    };
    if (channels.storeDown.hasSubscribers) {
      channels.storeDown.publish({
        store: this.store.kind,
        error: this.#down.error,
        retryAfterMs: FIRST_PROBE_MS,
      } satisfies StoreDownEvent);
    }
  }

  health(): StoreHealth {
    const down = this.#down;
    if (down === undefined) return { state: "up", store: this.store.kind };
    const now = performance.now();
    return {
      state: "down",
      store: this.store.kind,
      downForMs: now - down.since,
      nextProbeInMs: Math.max(0, down.probeAt - now),
      lastError: down.error,
    };
  }

  #refusal(down: Down): StoreUnavailableError {
    const retryAfterMs = Math.max(1, Math.ceil(down.probeAt - performance.now()));
    const error = new StoreUnavailableError(
      `the ${this.store.kind} store is unreachable (since ${Math.round(performance.now() - down.since)} ms: ${down.error.message.replace(/^leasehold: /, "")}); refused at once until a probe answers, the next in ${retryAfterMs} ms.`,
      down.error,
      this.store.kind,
    );
    error.retryAfterMs = retryAfterMs;
    return error;
  }

  #schedule(ms: number): NodeJS.Timeout {
    const timer = setTimeout(() => this.#probe(), ms);
    // A store that stays down must not keep the process alive.
    timer.unref();
    return timer;
  }

  #probe(): void {
    const down = this.#down;
    if (down === undefined) return;
    const key = this.#probeKey;
    const timeoutMs = (this.store as { timeoutMs?: number }).timeoutMs ?? 2000;
    let read: Promise<unknown>;
    try {
      read =
        key === undefined
          ? Promise.resolve()
          : this.#probeKind === "lock"
            ? this.store.lockStats(key)
            : this.store.semaphoreStats(key);
    } catch (error) {
      read = Promise.reject(error);
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => {
        const error = new StoreUnavailableError(`the probe got no answer within ${timeoutMs} ms.`, undefined, this.store.kind);
        error.unreachable = true;
        reject(error);
      }, timeoutMs);
      timer.unref();
    });
    Promise.race([read, timeout])
      .then(
        () => this.answered(),
        (error: unknown) => {
          if (!unreachable(error)) return this.answered();
          if (this.#down !== down) return;
          down.error = error instanceof Error ? error : new Error(String(error));
          down.interval = Math.min(down.interval * 2, MOST_PROBE_MS);
          down.probeAt = performance.now() + down.interval;
          down.timer = this.#schedule(down.interval);
        },
      )
      .finally(() => clearTimeout(timer));
  }
}

const breakers = new WeakMap<Store, Breaker>();

/** The breaker of a store; none for the embedded store, which cannot be unreachable. */
export function breakerOf(store: Store): Breaker | undefined {
  if (isMemoryStore(store)) return undefined;
  let breaker = breakers.get(store);
  if (breaker === undefined) {
    breaker = new Breaker(store);
    breakers.set(store, breaker);
  }
  return breaker;
}

/** Whether the store behind `source` answers, as this process has seen it (the embedded store is always up). */
export async function healthOfSource(source: StoreSource): Promise<StoreHealth> {
  let store: Store;
  try {
    store = await source.get();
  } catch (error) {
    // A client that cannot even be made is down, with nothing to probe: the next call tries again.
    return { state: "down", store: "unknown", lastError: error instanceof Error ? error : new Error(String(error)) };
  }
  return breakerOf(store)?.health() ?? { state: "up", store: store.kind };
}
