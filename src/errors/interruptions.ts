import { LeaseholdError } from "./base.js";

/**
 * The HTTP client went away before its response finished. An adapter aborts
 * the handler's `lease.signal` with it, so the work can stop; the permit is
 * returned once the work has ended, at the latest `disconnectGraceMs` later
 * (which is then reported as a loss).
 *
 * @example
 * ```ts
 * app.get("/report", semaphore("reports", 4), async (req, res) => {
 *   req.lease?.signal.addEventListener("abort", () => {
 *     if (req.lease?.signal.reason instanceof ClientAbortedError) log.info("client left");
 *     res.end(); // Express: the permit returns when the response is ended
 *   });
 * });
 * ```
 */
export class ClientAbortedError extends LeaseholdError {
  /** The lease id of the request. */
  readonly key: string;

  constructor(key: string) {
    super(
      "ERR_CLIENT_ABORTED",
      `leasehold: the client disconnected before the response for "${key}" finished; stop the work: its permit returns when the work ends.`,
    );
    this.key = key;
  }
}

/**
 * What `close()` ended. A closed semaphore, lock, store or middleware
 * refuses every call with it at once; a call waiting in a queue when
 * `close()` began is rejected with it (its place in the queue is given up,
 * so no other process waits on it); and the `signal` of a lease held at that
 * moment aborts with it, so the work can stop before its permit is released
 * (at the end of `close`'s `graceMs`). `key` names the id of the lease or
 * wait it ended, when it ended one.
 *
 * @example
 * ```ts
 * await slots.run("openai", async (lease) => {
 *   try {
 *     return await callModel({ signal: lease.signal });
 *   } catch (error) {
 *     if (lease.signal.reason instanceof ShutdownError) return saveForLater();
 *     throw error;
 *   }
 * });
 * ```
 */
export class ShutdownError extends LeaseholdError {
  /** What was closed: `"semaphore"`, `"lock"`, or a store's kind (`"redis"`, `"memory"`). */
  readonly closed: string;
  /** The id whose lease or wait was ended, when one was. */
  readonly key: string | undefined;

  constructor(closed: string, key?: string) {
    super(
      "ERR_SHUTDOWN",
      key === undefined
        ? `leasehold: this ${closed} ${closed === "semaphore" || closed === "lock" ? "" : "store "}is closed (close() was called) and takes no more calls. Make a new one if the process is not shutting down.`
        : `leasehold: the ${closed} holding or awaiting "${key}" is closing: stop the work; a permit still held is released when close()'s graceMs ends.`,
    );
    this.closed = closed;
    this.key = key;
  }
}
