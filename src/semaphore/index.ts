import type { LeaseHandle } from "../lease/handle.js";
import type { SemaphoreLease } from "../lease/types.js";
import type { CloseOptions } from "../options/types.js";
import type { ClientInput } from "../store/access/types.js";
import { DistributedSemaphore } from "./distributed-semaphore.js";
import type { Semaphore, SemaphoreOptions, SemaphoreRunOptions } from "./types.js";

/**
 * A counting semaphore whose holders keep renewable leases: at most `limit`
 * permits per id are held at once, across every process that shares the
 * store. Acquisition fails fast unless `waitMs` (a fair queue) or `retries`
 * (a bounded spin) is given.
 *
 * Two call forms: `semaphore(client, options)` and `semaphore({ client, ...options })`.
 * Without a client it runs on the embedded memory store (one process).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { semaphore } from "leasehold";
 *
 * const slots = semaphore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { limit: 20, leaseMs: 60_000 });
 * const text = await slots.run("openai", (lease) => callModel({ signal: lease.signal }));
 * ```
 */
export function semaphore(options: SemaphoreOptions): Semaphore;
export function semaphore(client: ClientInput, options: Omit<SemaphoreOptions, "client">): Semaphore;
export function semaphore(...args: unknown[]): Semaphore {
  return new DistributedSemaphore(args);
}

/** The lease handle itself, as `run` hands it to its body: the public lease plus loss listeners and `lose()`. */
type EngineLease = LeaseHandle & SemaphoreLease;

/**
 * A semaphore as the HTTP admission runs it: the same `run`, whose body is
 * typed with the engine's lease handle (to follow and report a loss) rather
 * than the public `SemaphoreLease`. Internal: not exported by the package.
 */
export interface SemaphoreEngine {
  run<T>(id: string, fn: (lease: EngineLease) => T | PromiseLike<T>, options?: SemaphoreRunOptions): Promise<T>;
  close(options?: CloseOptions): Promise<void>;
}

/** Creates a {@link SemaphoreEngine}; options are checked as `semaphore(options)` checks them. Internal. */
export function semaphoreEngine(options: SemaphoreOptions): SemaphoreEngine {
  return DistributedSemaphore.forEngine([options]);
}
