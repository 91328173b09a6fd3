import { backgroundTimers, type Due } from "./timers.js";

/** What confirming a handed-off grant needs of its lease (see {@link Confirmation}). */
export interface Confirmable {
  /** When the grant is known to be reserved until, at least (the lease's deadline). */
  deadline(): number;
  /** Given back (or on its way back) or lost: nothing to confirm. */
  over(): boolean;
  /** Extends to a full lease: whether it was still ours (a loss is the lease's to declare). */
  extendFull(): Promise<boolean>;
  lose(): void;
}

/**
 * Turns a grant handed off from the queue (its holder started on the
 * announcement, without a claim round trip) into a full lease with an extend,
 * sent halfway to the end of its reservation rather than at once: most bodies
 * end sooner, and their release makes it needless (one round trip of three
 * per contended hand-off). The rest of the reservation is left for the extend
 * to land, retried while it lasts. "Not ours" is a loss (told through the
 * signal, as any); so is a reservation that runs out unconfirmed, so a holder
 * is never left working past it untold, with `run` or without.
 *
 * Any extend that lands confirms it (the holder's own, `run`'s renewal): a
 * second one with the lease's own length would cut back a longer `extend(ms)`
 * the holder asked for. An extend still in flight decides first, for the same
 * reason: a confirmation landing after it would cut it back while its answer
 * set the holder's deadline.
 */
export class Confirmation {
  #due: Due | undefined;
  /** The last extend sent and not answered yet. */
  #extending: Promise<boolean> | undefined;
  #done = false;

  constructor(private readonly lease: Confirmable) {
    this.schedule();
  }

  /** Arms the confirmation halfway to the deadline (again, after a release the store did not answer). */
  schedule(): void {
    if (this.#done || this.#due !== undefined) return;
    const now = performance.now();
    this.#due = backgroundTimers.at(now + Math.max(0, this.lease.deadline() - now) / 2, () => {
      this.#due = undefined;
      this.#confirm();
    });
  }

  /** An extend the holder (or `run`) sent: the confirmation waits for its answer. */
  track(extending: Promise<boolean>): void {
    this.#extending = extending;
    const settled = (): void => {
      if (this.#extending === extending) this.#extending = undefined;
    };
    extending.then(settled, settled);
  }

  /** An extend landed, or the lease was given back: nothing left to confirm. */
  end(): void {
    this.#done = true;
    backgroundTimers.cancel(this.#due);
    this.#due = undefined;
  }

  #confirm(): void {
    // A release in flight gives the permit back (one the store does not answer arms this again).
    if (this.#done || this.lease.over()) return;
    const extending = this.#extending;
    if (extending !== undefined) {
      const again = (): void => this.#confirm();
      extending.then(again, again);
      return;
    }
    const left = this.lease.deadline() - performance.now();
    if (left <= 0) this.lease.lose();
    else this.lease.extendFull().catch(() => setTimeout(() => this.#confirm(), Math.min(left, 100)).unref());
  }
}
