import { ShutdownError, StoreUnavailableError } from "../../errors/index.js";
import { channels } from "../../observability/events.js";
import type { StoreDownEvent, StoreUpEvent } from "../../observability/types.js";
import { FIRST_PROBE_MS, MOST_PROBE_MS } from "../../options/defaults.js";
import { answersInProcess } from "../contract/shape.js";
import type { Store } from "../contract/types.js";
import type { StoreSource } from "./client.js";
import { declaredTimeoutMs } from "./deadlines.js";
import type { StoreHealth } from "./types.js";

/**
 * Error replies that mean "the server is there but cannot serve any call
 * now", whatever the key: they take the store down like a refused
 * connection, and the probe sees them too. Not `READONLY` (a client left on
 * a replica: every write fails at once, but the read-only probe succeeds, so
 * the store would flap) nor `TRYAGAIN` (one key's slot moving): those fail
 * fast on their own and are answers.
 */
const UNAVAILABLE_REPLIES = /^(LOADING|BUSY|MASTERDOWN|CLUSTERDOWN)\b/;
/** Codes of a socket that could not reach the server, or lost it. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENETDOWN",
]);
/** What ioredis, iovalkey and node-redis call a command they could not deliver or got no answer to. */
const CLIENT_ERRORS = new Set([
  "ClientClosedError",
  "ClientOfflineError",
  "ConnectionTimeoutError",
  "ReconnectStrategyError",
  "RootNodesUnavailableError",
  "SocketClosedUnexpectedlyError",
  "SocketTimeoutError",
  "TimeoutError",
  "MaxRetriesPerRequestError",
  "ClusterAllFailedError",
]);
const CLIENT_MESSAGES =
  /\b(ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|ENETDOWN)\b|connection is closed|client is closed|socket closed unexpectedly|connection timeout|command timed out|stream isn't writeable|cluster isn't ready|cluster is disconnect|node is disconnected|none of startup nodes is available|root nodes are unavailable|max retries per request/i;

/**
 * True when `error` says the store could not be reached (our timeout, a
 * refused, reset or closed connection, a client giving up on delivery, or
 * a reply that says no call can be served now), not that it answered. Only
 * these take a store down: anything else (an error reply, a bad reply, a
 * custom store's own bug) is that call's failure, and tripping on it would
 * turn one bad id into an outage (the probe reads the id that failed). A
 * custom store says "unreachable" with an error whose `code` is a network
 * code (`ECONNREFUSED`, `ETIMEDOUT`, …) or whose `unreachable` is `true`.
 */
export function unreachable(error: unknown): boolean {
  // A closed store refuses: it is not down.
  if (error instanceof ShutdownError) return false;
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; cause = cause.cause, depth++) {
    if ((cause as { unreachable?: unknown }).unreachable === true) return true;
    if (cause.name === "UnexpectedReply") return false;
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    if (CLIENT_ERRORS.has(cause.name) || CLIENT_ERRORS.has(cause.constructor.name)) return true;
    if (UNAVAILABLE_REPLIES.test(cause.message) || CLIENT_MESSAGES.test(cause.message)) return true;
    // Node's connect errors over several addresses (IPv4 and IPv6) come as one AggregateError.
    if (cause instanceof AggregateError && cause.errors.some((inner) => unreachable(inner))) return true;
  }
  return false;
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

  /** Throws the fast refusal while down; else remembers `storeKey` as the next probe's target. */
  admit(kind: "semaphore" | "lock", storeKey: string): void {
    const down = this.#down;
    if (down !== undefined) throw this.#refusal(down);
    this.#probeKind = kind;
    this.#probeKey = storeKey;
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
    const storeKey = this.#probeKey;
    // The same bound as every call's: a declared value a timer cannot hold (Infinity, "5s") is not used.
    const timeoutMs = declaredTimeoutMs(this.store);
    let read: Promise<unknown>;
    try {
      read =
        storeKey === undefined
          ? Promise.resolve()
          : this.#probeKind === "lock"
            ? this.store.lock.stats({ storeKey: storeKey })
            : this.store.semaphore.stats({ storeKey: storeKey });
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
  if (answersInProcess(store)) return undefined;
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
