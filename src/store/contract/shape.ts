// Telling a store apart from what else a `client` may be, at factory time, before any slot is taken.
import { ValidationError } from "../../errors/index.js";
import type { Store } from "./types.js";

/** Tells a store apart from a Redis client, a promise or a factory. */
export function isStore(value: unknown): value is Store {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as Store).semaphore?.acquire === "function" &&
    typeof (value as Store).lock?.acquire === "function"
  );
}

/**
 * Refuses a store written against the positional contract leasehold had
 * before the grouped one (`semaphoreAcquire(key, token, ...)` where
 * `semaphore.acquire({ key, token, ... })` is now called): the engine would
 * find none of its calls, so it says what changed, before any slot is taken.
 */
export function refusePositionalStore(value: unknown): void {
  if (typeof value !== "object" || value === null || isStore(value)) return;
  const old = value as { semaphoreAcquire?: unknown; lockAcquire?: unknown };
  if (typeof old.semaphoreAcquire !== "function" && typeof old.lockAcquire !== "function") return;
  throw new ValidationError(
    "client",
    "`client` is a store written for the old positional contract (`semaphoreAcquire(key, token, limit, ...)`). " +
      "A store now groups its calls and takes one object per call: `semaphore.acquire({ storeKey, token, limit, weight, leaseMs })`, " +
      '`lock.release({ storeKey, token })`, `watch({ storeKey, onGrant })`. See "A store of your own" in docs/clients.md.',
  );
}

/** The calls of the contract a store must have, by group (`close` is optional). */
const CONTRACT = {
  semaphore: ["acquire", "extend", "release", "count", "stats", "inspect", "leave", "refreshWaiters"],
  lock: ["acquire", "extend", "release", "stats", "inspect", "leave", "refreshWaiters"],
} as const;

/**
 * Refuses a store that lacks calls of the contract: the engine would find
 * out only after a slot was taken (a missing `semaphore.release` keeps every
 * permit for its whole lease; a missing `watch` leaves waiters deaf to their
 * grants).
 */
export function refuseIncompleteStore(value: unknown): void {
  if (!isStore(value)) return;
  const missing: string[] = [];
  for (const group of ["semaphore", "lock"] as const) {
    const calls = value[group] as unknown as Record<string, unknown>;
    for (const name of CONTRACT[group]) if (typeof calls[name] !== "function") missing.push(`${group}.${name}`);
  }
  if (typeof value.watch !== "function") missing.push("watch");
  if (missing.length === 0) return;
  throw new ValidationError(
    "client",
    `\`client\` is a store without ${missing.map((name) => `\`${name}\``).join(", ")}: every call of the contract is needed. ` +
      "A wrapper copies the groups (`{ ...store.semaphore, acquire }`) and delegates the rest (`watch: (call) => store.watch(call)`); " +
      'See "A store of your own" in docs/clients.md.',
  );
}

/**
 * Set by the embedded store on itself (not enumerable), pointing at itself. A wrapper does not
 * carry it: a spread copies no non-enumerable field, and `Object.create(store)` inherits a brand
 * that points at another object. Its own `timeoutMs: 0` is inherited by both, which is why the
 * declared figure alone cannot say "never hangs".
 */
export const IN_PROCESS: unique symbol = Symbol("leasehold.inProcess");

/** Whether `store` is the embedded store itself, which answers in this process and never hangs (not a wrapper of it). */
export function answersInProcess(store: Store): boolean {
  return (store as { [IN_PROCESS]?: unknown })[IN_PROCESS] === store;
}
