import { WAITER_LEASE_MS } from "../../options/defaults.js";
import { knownOptions, optionsObject, positiveMs } from "../../options/validate.js";
import { answersInProcess } from "../contract/shape.js";
import type { Store } from "../contract/types.js";
import { type MemoryClock, processClock } from "./clock.js";
import type { LocalStore } from "./local.js";
import { EmbeddedStore } from "./store.js";

// The embedded store's public face. Its modules (./memory/) mirror the Lua's (lua/lib/, lua/*.lua)
// file by file and function by function; this file stays where the engine and users import it from.
export type { MemoryClock } from "./clock.js";
export type { LocalStore } from "./local.js";
export type { LocalJoin, LocalWaiter } from "./queue.js";

/**
 * An in-process store with the same semantics as Redis, for one process,
 * tests and local development. Without a `client`, every primitive shares one
 * process-wide instance of it; create your own to isolate.
 *
 * @example
 * ```ts
 * import { memoryStore, semaphore } from "leasehold";
 * const slots = semaphore({ client: memoryStore(), limit: 4 });
 * ```
 */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return createMemoryStore(options, processClock);
}

/** {@link memoryStore} on a given clock: the model-based suite passes one it advances itself. */
export function createMemoryStore(
  options: MemoryStoreOptions,
  clock: MemoryClock,
): MemoryStore & { debugIds: EmbeddedStore["debugIds"] } {
  const given = optionsObject(options, "memoryStore");
  knownOptions(given, ["waiterLeaseMs"], "memoryStore");
  return new EmbeddedStore(
    given.waiterLeaseMs === undefined
      ? WAITER_LEASE_MS
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without being refreshed, e.g. 5000.",
        ),
    clock,
  );
}

/**
 * The embedded store {@link memoryStore} makes.
 *
 * @example
 * ```ts
 * const store: MemoryStore = memoryStore();
 * await store.close();
 * ```
 */
export interface MemoryStore extends Store {
  readonly kind: "memory";
  /**
   * Drops every id the store keeps and its timer (none keeps the process
   * alive even before); every later acquire, read or refresh is refused with
   * `ShutdownError`, and an extend or release answers as for a lease nobody
   * holds. Close the semaphores and locks made on it first. A second call
   * returns the same promise.
   */
  close(): Promise<void>;
}

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /**
   * How long a waiter stays queued without its waiting call refreshing it
   * (refreshed every third of it); a permit granted to a waiter stays
   * reserved until then, unless claimed first.
   * @default 5000
   */
  waiterLeaseMs?: number;
}

/**
 * True for the embedded store itself, not for a wrapper made with `Object.create(store)` (whose
 * overrides must be called): only then may the engine call its synchronous cores at once.
 */
export function isMemoryStore(store: Store): store is LocalStore {
  // The brand the embedded store sets on itself (see contract/shape.ts): one property load, not a call.
  return answersInProcess(store);
}

let shared: Store | undefined;

/** The process-wide store used when no `client` is given. */
export function defaultStore(): Store {
  shared ??= memoryStore();
  return shared;
}
