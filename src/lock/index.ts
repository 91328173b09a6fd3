import type { LeaseHandle } from "../lease/handle.js";
import type { CloseOptions } from "../options/types.js";
import type { ClientInput } from "../store/access/types.js";
import { DistributedLock } from "./distributed-lock.js";
import type { Lock, LockOptions, LockRunOptions } from "./types.js";

/**
 * A distributed lock whose holder keeps a renewable lease: one caller per id
 * at a time, across every process that shares the store. Taken with
 * `SET key token NX PX ttl`; extend and release check the token, so an
 * expired holder never deletes its successor's lock.
 *
 * Two call forms: `lock(client, options)` and `lock({ client, ...options })`.
 * Without a client it runs on the embedded memory store (one process).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { lock } from "leasehold";
 *
 * const locks = lock(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { ttlMs: 10_000 });
 * await locks.run("order:42", (lease) => charge(order, { signal: lease.signal }));
 * ```
 */
export function lock(options?: LockOptions): Lock;
export function lock(client: ClientInput, options?: Omit<LockOptions, "client">): Lock;
export function lock(...args: unknown[]): Lock {
  return new DistributedLock(args);
}

/**
 * A lock as the HTTP admission runs it: the same `run`, whose body is typed
 * with the engine's lease handle (to follow and report a loss) rather than
 * the public `LockLease`. Internal: not exported by the package.
 */
export interface LockEngine {
  run<T>(id: string, fn: (lease: LeaseHandle) => T | PromiseLike<T>, options?: LockRunOptions): Promise<T>;
  close(options?: CloseOptions): Promise<void>;
}

/** Creates a {@link LockEngine}; options are checked as `lock(options)` checks them. Internal. */
export function lockEngine(options: LockOptions): LockEngine {
  return DistributedLock.forEngine([options]);
}
