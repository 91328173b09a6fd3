import { LeaseholdError } from "./base.js";

/**
 * The store could not be reached or answered nonsense within its bound (the
 * store's `timeoutMs`, as in `redisStore(client, { timeoutMs })`). No slot is
 * assumed held: an acquire whose outcome is unknown is released in the
 * background. `cause` holds the underlying error.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof StoreUnavailableError) return reply.status(503).send("limiter unavailable");
 * }
 * ```
 */
export class StoreUnavailableError extends LeaseholdError {
  /** The kind of store that failed (`"redis"`, `"memory"`, or a custom store's kind), when known. */
  readonly store: string | undefined;
  /**
   * Set when the call was refused at once because the store is known to be
   * unreachable: ms until leasehold probes it again (what an HTTP adapter
   * answers as `Retry-After`).
   */
  retryAfterMs: number | undefined;
  /** True when the store did not answer at all (a timeout), as opposed to answering with an error. */
  unreachable = false;

  constructor(message: string, cause?: unknown, store?: string) {
    super("ERR_STORE_UNAVAILABLE", `leasehold: ${message}`, { cause });
    this.store = store;
  }
}

/**
 * The Redis user leasehold connects as may not run a command (or touch a key
 * or channel) that leasehold needs: an ACL that is missing a permission. Not
 * transient, so never retried: an acquire rejects with it at once, and a
 * waiter stops waiting with it. `command` names what was refused (e.g.
 * `"zadd"`, or `"keys"` / `"channels"` for a key or channel pattern), and the
 * message gives the `ACL SETUSER` fix; docs/operations.md lists the full ACL.
 *
 * @example
 * ```ts
 * catch (error) {
 *   if (error instanceof StorePermissionError) log.error(`fix the Redis ACL: +${error.command}`);
 * }
 * ```
 */
export class StorePermissionError extends StoreUnavailableError {
  override readonly code = "ERR_STORE_PERMISSION";
  /** The command refused, lower case (`"evalsha"`, `"zadd"`), or `"keys"` / `"channels"` when a key or channel pattern was. */
  readonly command: string;

  constructor(command: string, message: string, cause?: unknown) {
    super(message, cause, "redis");
    this.command = command;
  }
}
