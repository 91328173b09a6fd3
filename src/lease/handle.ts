import type { Acquired } from "../acquire/types.js";
import { type LossReason, lossReason } from "../errors/lease-lost.js";
import { channels } from "../observability/events.js";
import type { LostEvent, ReleasedEvent, Subject } from "../observability/types.js";
import { positiveMs } from "../options/validate.js";
import { backgroundTimers, type Due } from "../runtime/timers.js";
import { answered, isPending } from "../store/access/bounded.js";
import { isFlag } from "../store/contract/replies.js";
import type { LeaseCall } from "./call.js";
import { Confirmation } from "./confirmation.js";
import { holdToReport } from "./hold-samples.js";
import { AFTER, BEFORE, TRACKED } from "./links.js";
import type { Lease } from "./types.js";

/** What tracks the leases a factory holds (see `holdings.ts`): told when one is given back. */
export interface LeaseOwner {
  released(lease: LeaseHandle): void;
}

/**
 * Redis reads its clock in whole milliseconds, so a lease can end up to 1 ms
 * sooner in real time than the client's count suggests: the deadline gives it up.
 */
const CLOCK_GRAIN_MS = 1;

/** The settled answers of a release answered at once, shared: a resolved promise holds no state of its own. */
const RELEASED = Promise.resolve(true);
const NOT_OURS = Promise.resolve(false);

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
  /** The call that took it: its store calls, and the error that names its loss. */
  readonly #call: LeaseCall;
  /** The store's record of it (`AcquireReply.record`): handed back so the store need not look the token up. */
  readonly #record: object | undefined;
  /** When the lease was had (its acquire's send time, or the hand-off), for the released event and the id's typical hold. */
  readonly heldSince: number;
  #released = false;
  /** A renewal answered "not ours" after the holder's release was made (see `#sendExtend`). */
  #notOurs = false;
  /** The latest renewal, until it is answered (see `#extend`). */
  #extending: Promise<boolean> | undefined;
  /** Given back before any holder had it (see `giveBackUnheld`). */
  #unheld = false;
  /** The holder's release, in flight or answered; undefined again if the store did not answer it. */
  #releasing: Promise<boolean> | undefined;
  /**
   * Set by `run`'s keeper, which watches the deadline itself. A lease from
   * `acquire` is watched here instead, once someone listens for its loss.
   */
  kept = false;
  /** `run`'s keeper, told when the deadline moves sooner (its next tick may lie past it). */
  keeper: { deadlineSooner(): void } | undefined;
  #watch: Due | undefined;
  /** A handed-off grant's confirmation, until an extend lands or the lease is given back. */
  #confirmation: Confirmation | undefined;
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
  /** Whether its owner tracks it, and its neighbours there (see `Holdings`): fields, not a Set entry. */
  [TRACKED] = false;
  [BEFORE]: LeaseHandle | undefined = undefined;
  [AFTER]: LeaseHandle | undefined = undefined;

  readonly key: string;
  readonly token: string;
  readonly fence: number;
  readonly leaseMs: number;
  readonly waitedMs: number;

  /** `had.until`: a grant handed off without a claim, reserved until then at least (see confirmation.ts). */
  constructor(call: LeaseCall, had: Acquired) {
    this.#call = call;
    this.#record = had.record;
    this.key = call.id;
    this.token = had.token;
    this.fence = had.fence;
    this.leaseMs = call.leaseMs;
    this.waitedMs = had.waitedMs;
    this.heldSince = had.sentAt;
    if (had.until === undefined) {
      this.deadline = had.sentAt + call.leaseMs - CLOCK_GRAIN_MS;
    } else {
      this.deadline = had.until;
      this.#confirmation = new Confirmation({
        deadline: () => this.deadline,
        over: () => this.#released || this.#lost !== undefined,
        extendFull: () => this.#extend(this.leaseMs),
        lose: () => this.lose(),
      });
    }
  }

  extend(ms: number = this.leaseMs): Promise<boolean> {
    const extending = this.#extend(ms);
    this.#confirmation?.track(extending);
    return extending;
  }

  /**
   * A renewal, remembered until answered: the release waits for it (see `giveBack`), so that the
   * store gets the lease's calls in the order they were made. A store may reorder calls of different
   * kinds (the Redis store gathers renewals for the end of a turn, and a script the server has not
   * loaded goes again after a round trip); an extend answered after the release would say "not ours".
   */
  #extend(ms: number): Promise<boolean> {
    const extending = this.#sendExtend(ms);
    this.#extending = extending;
    const settled = (): void => {
      if (this.#extending === extending) this.#extending = undefined;
    };
    extending.then(settled, settled);
    return extending;
  }

  async #sendExtend(ms: number): Promise<boolean> {
    positiveMs("ms", ms, "Pass the new lease length to extend(ms), or nothing to reuse the lease's own.");
    if (this.#released || this.#lost !== undefined) return false;
    const sentAt = performance.now();
    const call = this.#call;
    let ours: boolean;
    try {
      ours = await answered(call.store, "extend", () => call.extend(this.token, ms, this.#record), isFlag, call);
    } catch (error) {
      // Unanswered: the store may have applied it. A shorter lease then ends sooner than the holder
      // was told (test/engine/extend-shorter.test.ts); a longer one changes nothing.
      const deadline = sentAt + ms - CLOCK_GRAIN_MS;
      if (deadline < this.deadline) this.#moveDeadline(deadline);
      throw error;
    }
    if (ours) {
      this.#moveDeadline(sentAt + ms - CLOCK_GRAIN_MS);
      this.#confirmation?.end();
      this.#confirmation = undefined;
    } else if (this.#released) {
      // Answered once the holder had given it back (a store that reorders one lease's calls): the
      // release's own answer says whether it was lost; if the store leaves that unanswered, this stands.
      this.#notOurs = true;
    } else this.lose();
    return ours;
  }

  /** The lease now ends at `deadline`: a watch armed for a later one would tell the holder too late. */
  #moveDeadline(deadline: number): void {
    if (deadline >= this.deadline) {
      this.deadline = deadline;
      return;
    }
    this.deadline = deadline;
    // Kept by `run`: the keeper watches it (test/engine/extend-shorter.test.ts).
    this.keeper?.deadlineSooner();
    if (this.#watch !== undefined) {
      backgroundTimers.cancel(this.#watch);
      this.#watch = undefined;
      this.#watchDeadline();
    }
  }

  release(): Promise<boolean> {
    if (this.#released) return Promise.resolve(false);
    const answer = this.giveBack();
    return typeof answer === "boolean" ? (this.#releasing as Promise<boolean>) : answer;
  }

  /**
   * Gives back a lease no holder was ever handed (its call was refused as the lease arrived: its
   * factory is closing). A "not ours" answer then says only that it lapsed on its way: nobody lost
   * anything, so nothing is reported lost.
   */
  giveBackUnheld(): Promise<boolean> {
    this.#unheld = true;
    return this.release();
  }

  /**
   * `release()` as `run`'s keeper makes it: the answer itself when the store
   * gives it at once (see `Answer`), else its promise. `at`: the keeper's
   * clock reading of this turn, if it has one.
   */
  giveBack(at?: number): boolean | Promise<boolean> {
    if (this.#released) return Promise.resolve(false);
    this.#released = true;
    const extending = this.#extending;
    const answer =
      extending === undefined ? this.#sendRelease(at) : extending.then(this.#sendReleaseLater, this.#sendReleaseLater);
    if (!isPending(answer)) {
      const ours = this.#answered(answer);
      this.#releasing = ours ? RELEASED : NOT_OURS;
      return ours;
    }
    const releasing = extending === undefined ? answer.then(this.#ours, this.#unanswered) : answer;
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

  /** The release, sent: one clock reading (`at`, or now) serves the hold report and the store. */
  #sendRelease(at?: number): boolean | Promise<boolean> {
    const now = at ?? performance.now();
    const call = this.#call;
    return answered(call.store, "release", () => call.release(this.token, this.#heldMs(now), this.#record, now), isFlag, call);
  }

  /** The release sent once a renewal in flight has been answered. */
  readonly #sendReleaseLater = (): Promise<boolean> => {
    const answer = this.#sendRelease();
    return isPending(answer) ? answer.then(this.#ours, this.#unanswered) : Promise.resolve(this.#answered(answer));
  };

  readonly #ours = (ours: boolean): boolean => this.#answered(ours);

  /** The store did not answer: the lease may still be held, so a retry must be possible; unless a renewal has already been answered "not ours". */
  readonly #unanswered = (error: unknown): never => {
    this.#released = false;
    this.#releasing = undefined;
    if (this.#notOurs) this.lose();
    else this.#confirmation?.schedule();
    throw error;
  };

  /** How long the lease has been held at `now`, in whole ms, when its release is to report it (see hold-samples.ts). */
  #heldMs(now: number): number | undefined {
    return holdToReport(this.#call.storeKey, this.heldSince, now);
  }

  /** What follows the store's answer to a release: the event, and a loss if it was not ours. */
  #answered(ours: boolean): boolean {
    this.owner?.released(this);
    // Given back: nothing to watch or confirm any more.
    backgroundTimers.cancel(this.#watch);
    this.#watch = undefined;
    this.#confirmation?.end();
    this.#confirmation = undefined;
    if (channels.released.hasSubscribers) {
      const { subject, weight } = this.#call;
      channels.released.publish({
        ...subject,
        token: this.token,
        heldMs: performance.now() - this.heldSince,
        ours,
        weight,
      } satisfies ReleasedEvent);
    }
    if (!ours && !this.#unheld) this.lose();
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
   * `cause`, when given, says why (e.g. the client that left), as the error's `cause`; `reason`,
   * when given, is the reason the message words (else it is read from `cause` and the deadline).
   */
  lose(cause?: Error, reason?: LossReason): void {
    if (this.#lost !== undefined) return;
    // Past its deadline by this process's clock, a lease ran out; before it, the store took it away.
    const error = this.#call.lost(reason ?? lossReason(cause, performance.now() >= this.deadline));
    if (cause !== undefined) Object.defineProperty(error, "cause", { value: cause, configurable: true, writable: true });
    this.#lost = error;
    this.#controller?.abort(error);
    for (const listener of this.#onLose ?? []) listener(error);
    if (channels.lost.hasSubscribers)
      channels.lost.publish({ ...this.#call.subject, token: this.token, error } satisfies LostEvent);
  }

  /** Who the lease is for (kind, name, id), for events. */
  get subject(): Subject {
    return this.#call.subject;
  }
}
