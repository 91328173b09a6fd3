import type { LeaseLostError } from "./errors.js";
import { channels, type LostEvent, type ReleasedEvent, type Subject } from "./events.js";
import { holdToReport } from "./hold-samples.js";
import { isMemoryStore } from "./store/memory.js";
import type { Store } from "./store/types.js";
import { bounded, send } from "./store-call.js";
import { isFlag } from "./store-replies.js";
import { backgroundTimers, type Due } from "./timers.js";
import { positiveMs } from "./validate.js";

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

/** A lease on semaphore permits. */
export interface SemaphoreLease extends Lease {
  /** The limit the permits were taken under. */
  readonly limit: number;
  /** How many permits this lease holds. */
  readonly weight: number;
  /** The tenant the permits count against too, when the call passed one. */
  readonly tenant: string | undefined;
}

/** A lease on a lock. */
export type LockLease = Lease;

/** What a handle needs from its primitive: the store calls and the error that names a loss. */
export interface LeaseBackend {
  readonly store: Store;
  readonly kind: "semaphore" | "lock";
  /** The store key (`{prefix:id}`). */
  readonly key: string;
  extend(token: string, ms: number): Promise<boolean>;
  /** `heldMs`: how long the lease was held, for the id's typical hold (see `SemaphoreOperations.release`), when reported. */
  release(token: string, heldMs: number | undefined): Promise<boolean>;
  lost(): LeaseLostError;
  /** Who the lease is for, in events. */
  readonly subject: Subject;
  /** Permits held (1 for a lock), in events. */
  readonly weight: number;
}

/** What tracks the leases a factory holds (see `src/holdings.ts`): told when one is given back. */
export interface LeaseOwner {
  released(lease: LeaseHandle): void;
}

/**
 * Redis reads its clock in whole milliseconds, so a lease can end up to 1 ms
 * sooner in real time than the client's count suggests: the deadline gives it up.
 */
const CLOCK_GRAIN_MS = 1;

/**
 * The one lease implementation behind semaphores and locks. `deadline` is on
 * the process's monotonic clock: the send time of the last successful
 * acquire or extend plus its length, which is never later than the expiry
 * the store computed on its own clock.
 */
export class LeaseHandle implements Lease {
  /** Monotonic time after which the lease has certainly lapsed unless extended. */
  deadline: number;
  // Made on first use: most short leases are never asked for their signal, and an
  // AbortController costs more than the rest of an in-memory acquire.
  #controller: AbortController | undefined;
  /** The LeaseLost error, once the lease is declared lost. */
  #lost: Error | undefined;
  #onLose: ((error: Error) => void)[] | undefined;
  readonly #backend: LeaseBackend;
  /** When the lease was had (its acquire's send time, or the hand-off), for the released event and the id's typical hold. */
  readonly #heldSince: number;
  #released = false;
  /** The holder's release, in flight or answered; undefined again if the store did not answer it. */
  #releasing: Promise<boolean> | undefined;
  /**
   * Set by `run`'s keeper, which watches the deadline itself. A lease from
   * `acquire` is watched here instead, once someone listens for its loss.
   */
  kept = false;
  #watch: Due | undefined;
  /** Why the holder was asked to stop while the lease is still held (its factory is closing). */
  #interrupted: Error | undefined;
  #onInterrupt: ((reason: Error) => void)[] | undefined;
  /**
   * What keeps track of the lease for its factory's `close()`: told when the
   * lease is given back. A plain field, set once the lease is handed out.
   */
  owner: LeaseOwner | undefined;
  /** Set by `run`'s keeper once the body has settled: the lease is on its way back, not abandoned. */
  finishing = false;

  /**
   * `until`, for a lease handed off from the queue without a claim: the
   * grant's reservation is known to last until then at least; the lease is
   * confirmed now, in the background, with an extend to a full lease.
   */
  constructor(
    readonly key: string,
    readonly token: string,
    readonly fence: number,
    readonly leaseMs: number,
    sentAt: number,
    readonly waitedMs: number,
    backend: LeaseBackend,
    until?: number,
  ) {
    this.#backend = backend;
    this.#heldSince = sentAt;
    if (until === undefined) {
      this.deadline = sentAt + leaseMs - CLOCK_GRAIN_MS;
    } else {
      this.deadline = until;
      this.#confirm();
    }
  }

  /**
   * Turns a handed-off grant into a full lease: extends until the store
   * answers, retrying a failed round trip while the reservation lasts. "Not
   * ours" is a loss (told through the signal, as any); a reservation that
   * runs out unconfirmed is one too, so a holder is never left working past
   * it untold, with `run` or without.
   */
  #confirm(): void {
    this.extend().then(
      () => {},
      () => {
        const left = this.deadline - performance.now();
        if (this.#released || this.#lost !== undefined) return;
        if (left <= 0) {
          this.lose();
          return;
        }
        setTimeout(() => (performance.now() >= this.deadline ? this.lose() : this.#confirm()), Math.min(left, 100)).unref();
      },
    );
  }

  async extend(ms: number = this.leaseMs): Promise<boolean> {
    positiveMs("ms", ms, "Pass the new lease length to extend(ms), or nothing to reuse the lease's own.");
    if (this.#released || this.#lost !== undefined) return false;
    const sentAt = performance.now();
    const store = this.#backend.store;
    const ours = isMemoryStore(store)
      ? store.extendNow(this.#backend.kind, this.#backend.key, this.token, ms)
      : await bounded(
          store,
          "extend",
          send(() => this.#backend.extend(this.token, ms)),
          isFlag,
          this.#backend.subject,
        );
    if (ours) this.deadline = sentAt + ms - CLOCK_GRAIN_MS;
    else this.lose();
    return ours;
  }

  release(): Promise<boolean> {
    if (this.#released) return Promise.resolve(false);
    this.#released = true;
    const store = this.#backend.store;
    if (isMemoryStore(store)) {
      // The embedded store answers at once: no round trip to bound, check or undo.
      const ours = store.releaseNow(this.#backend.kind, this.#backend.key, this.token, this.#heldMs());
      this.#releasing = Promise.resolve(this.#answered(ours));
      return this.#releasing;
    }
    const releasing = this.#giveBack();
    // Unless a store that throws synchronously has already undone it.
    if (this.#released) this.#releasing = releasing;
    return releasing;
  }

  /**
   * The holder's own release, while in flight and once answered: `run` waits
   * for it instead of sending another, and its answer alone says whether the
   * lease was lost. Undefined before `release()`, and again after a release
   * the store did not answer (the lease may still be held).
   */
  get releasing(): Promise<boolean> | undefined {
    return this.#releasing;
  }

  async #giveBack(): Promise<boolean> {
    let ours: boolean;
    try {
      ours = await bounded(
        this.#backend.store,
        "release",
        send(() => this.#backend.release(this.token, this.#heldMs())),
        isFlag,
        this.#backend.subject,
      );
    } catch (error) {
      // The store did not answer: the lease may still be held, so a retry must be possible.
      this.#released = false;
      this.#releasing = undefined;
      throw error;
    }
    return this.#answered(ours);
  }

  /** How long the lease has been held, in whole ms, when its release is to report it (see hold-samples.ts). */
  #heldMs(): number | undefined {
    return holdToReport(this.#backend.key, this.#heldSince);
  }

  /** What follows the store's answer to a release: the event, and a loss if it was not ours. */
  #answered(ours: boolean): boolean {
    this.owner?.released(this);
    // Given back: nothing to watch any more.
    backgroundTimers.cancel(this.#watch);
    this.#watch = undefined;
    if (channels.released.hasSubscribers) {
      const { subject, weight } = this.#backend;
      channels.released.publish({
        ...subject,
        token: this.token,
        heldMs: performance.now() - this.#heldSince,
        ours,
        weight,
      } satisfies ReleasedEvent);
    }
    if (!ours) this.lose();
    return ours;
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const reason = this.#lost ?? this.#interrupted;
      if (reason !== undefined) this.#controller.abort(reason);
      if (this.#lost === undefined) this.#watchDeadline();
    }
    return this.#controller.signal;
  }

  /** Calls `listener` when the lease is declared lost, without making a signal. */
  onLose(listener: (error: Error) => void): void {
    if (this.#lost !== undefined) listener(this.#lost);
    else {
      this.#onLose ??= [];
      this.#onLose.push(listener);
      this.#watchDeadline();
    }
  }

  /**
   * A lease nobody renews lapses at its deadline: its holder is told then
   * (the store may already have granted the permit to someone else), not at
   * its next call. One shared timer per millisecond; armed only once someone
   * listens, so a short lease that is never asked pays nothing.
   */
  #watchDeadline(): void {
    if (this.kept || this.#watch !== undefined || this.#released || this.#lost !== undefined) return;
    if (performance.now() >= this.deadline) {
      this.lose();
      return;
    }
    this.#watch = backgroundTimers.at(this.deadline, () => {
      this.#watch = undefined;
      if (this.kept || this.#released || this.#lost !== undefined) return;
      // Extended meanwhile: watch the new deadline.
      if (performance.now() < this.deadline) this.#watchDeadline();
      else this.lose();
    });
  }

  /**
   * Asks the holder to stop: aborts `signal` with `reason` (a `ShutdownError`)
   * while the lease is still held, without declaring it lost. Once.
   */
  interrupt(reason: Error): void {
    if (this.#interrupted !== undefined || this.#lost !== undefined) return;
    this.#interrupted = reason;
    this.#controller?.abort(reason);
    for (const listener of this.#onInterrupt ?? []) listener(reason);
  }

  /** Why the holder was asked to stop, if it was (see `interrupt`). */
  get interrupted(): Error | undefined {
    return this.#interrupted;
  }

  /** Calls `listener` when the holder is asked to stop (see `interrupt`), without making a signal. */
  onInterrupt(listener: (reason: Error) => void): void {
    if (this.#interrupted !== undefined) listener(this.#interrupted);
    else {
      this.#onInterrupt ??= [];
      this.#onInterrupt.push(listener);
    }
  }

  /** The LeaseLost error once the lease is known to be gone, else undefined. */
  get lost(): Error | undefined {
    return this.#lost;
  }

  /**
   * Declares the lease gone: aborts `signal` with the LeaseLost error, once.
   * `cause`, when given, says why (e.g. the client that left), as the error's `cause`.
   */
  lose(cause?: Error): void {
    if (this.#lost !== undefined) return;
    const error = this.#backend.lost();
    if (cause !== undefined) Object.defineProperty(error, "cause", { value: cause, configurable: true, writable: true });
    this.#lost = error;
    this.#controller?.abort(error);
    for (const listener of this.#onLose ?? []) listener(error);
    if (channels.lost.hasSubscribers)
      channels.lost.publish({ ...this.#backend.subject, token: this.token, error } satisfies LostEvent);
  }

  /** Who the lease is for (kind, name, id), for events. */
  get subject(): Subject {
    return this.#backend.subject;
  }
}
