/**
 * A held lease: what `acquire` resolves and what `run` passes to its body.
 *
 * @example
 * ```ts
 * const lease = await locks.acquire("order:42");
 * if (lease) {
 *   try { await charge({ signal: lease.signal }); }
 *   finally { await lease.release(); }
 * }
 * ```
 */
export interface Lease {
  /** The id the lease was taken on, as passed to `acquire` or `run`. */
  readonly key: string;
  /**
   * This holder's token: 128 random bits (base64url), then when and by whom
   * the lease was taken (`.<ms, base36>.<owner, base64url>`, a semaphore's
   * `.<limit, base36>`, and `@<tenant>` for a tenant's). Only it can extend
   * or release the lease; `holders(id)` reads the rest back.
   */
  readonly token: string;
  /**
   * The fencing token: a safe integer greater than that of every earlier
   * grant on the same id (and prefix), never reused, also after the id was
   * idle, its keys expired, a `SCRIPT FLUSH` or a Redis restart with
   * persistence. Pass it with every write the lease protects, and have the
   * resource refuse a write whose fence is older than the newest it has seen:
   * a holder that was paused past its lease (GC, SIGSTOP, a slow network)
   * then cannot overwrite its successor's work, whatever it believes.
   * Derived from the store's clock in microseconds; see the README's
   * Guarantees for what can still break it (a clock stepped back).
   *
   * @example
   * ```ts
   * await locks.run("invoice:42", async (lease) => {
   *   await db.query(
   *     "UPDATE invoices SET total = $1, fence = $2 WHERE id = 42 AND fence < $2",
   *     [total, lease.fence],
   *   );
   * });
   * ```
   */
  readonly fence: number;
  /**
   * Aborts, with the LeaseLost error as its `reason`, the moment the lease is
   * known to be gone; or with a `ShutdownError` when the semaphore or lock
   * that holds it is closing (the permit is released once the work stops, at
   * the latest when `close()`'s `graceMs` ends). Pass it to the work the lease
   * protects.
   */
  readonly signal: AbortSignal;
  /** How long the caller waited for this lease (in a queue, or spinning), in ms. */
  readonly waitedMs: number;
  /**
   * Pushes the expiry to now + `ms` (default: the lease's own length).
   * Resolves true while the lease is ours; false once it is gone, which also
   * aborts `signal`. Rejects with `StoreUnavailableError` if the store cannot
   * answer (the lease may still be ours).
   */
  extend(ms?: number): Promise<boolean>;
  /**
   * Gives the lease back. Resolves true only if it was still ours, false if
   * it had lapsed or was already released (nothing extra is freed). Inside
   * `run` it may be called before the body ends: the permit is free at once,
   * renewal stops, and `run` does not report a loss unless this answers false.
   */
  release(): Promise<boolean>;
}

/**
 * A lease on semaphore permits.
 *
 * @example
 * ```ts
 * const lease = await slots.acquire("openai", { weight: 2 });
 * if (lease) console.log(`${lease.weight} of ${lease.limit} permits, fence ${lease.fence}`);
 * ```
 */
export interface SemaphoreLease extends Lease {
  /** The limit the permits were taken under. */
  readonly limit: number;
  /** How many permits this lease holds. */
  readonly weight: number;
  /** The tenant the permits count against too, when the call passed one. */
  readonly tenant: string | undefined;
}

/**
 * A lease on a lock.
 *
 * @example
 * ```ts
 * const lease: LockLease | null = await locks.acquire("order:42");
 * if (lease) await lease.release();
 * ```
 */
export type LockLease = Lease;

/**
 * Who holds a lease, read from its token, as `holders(id)` and
 * `holder(id)` report it.
 *
 * @example
 * ```ts
 * for (const h of await slots.holders("openai")) {
 *   console.log(h.owner, `${Date.now() - (h.acquiredAt ?? Date.now())} ms`, h.weight);
 * }
 * ```
 */
export interface Holder {
  /** The lease's token; `leasehold release --token` takes it (or a unique prefix of it). */
  token: string;
  /**
   * Who took the lease: the `owner` option of the call or of its factory,
   * `<hostname>:<pid>` by default. Absent for a token that carries none
   * (taken through a store directly).
   */
  owner?: string;
  /**
   * When the call that took the lease asked for it, in ms since the epoch, by
   * the clock of the process that took it (a caller that queued: when it
   * started waiting). Absent, as `owner`.
   */
  acquiredAt?: number;
  /** When the lease ends unless renewed, in ms since the epoch, by this process's clock (the store's figure, not the holder's). */
  expiresAt: number;
  /** Permits it holds (1 for a lock). */
  weight: number;
  /** The tenant its permits count against, when the call passed one. */
  tenant?: string;
  /** The limit a semaphore lease was taken under; absent for a lock. */
  limit?: number;
}
