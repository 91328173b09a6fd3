import type { Store } from "../contract/types.js";

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
