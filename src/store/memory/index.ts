// The embedded store's entry (its public types are in types.ts). The modules beside it mirror the
// Lua's (lua/lib/, lua/*.lua) file by file and function by function.
import { WAITER_LEASE_MS } from "../../options/defaults.js";
import { knownOptions, optionsObject, positiveMs } from "../../options/validate.js";
import type { Store } from "../contract/types.js";
import { type MemoryClock, processClock } from "./clock.js";
import { EmbeddedStore } from "./store.js";
import type { MemoryStore, MemoryStoreOptions } from "./types.js";

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

let shared: Store | undefined;

/** The process-wide store used when no `client` is given. */
export function defaultStore(): Store {
  shared ??= memoryStore();
  return shared;
}
