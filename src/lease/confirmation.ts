import { backgroundTimers, type Due } from "../runtime/timers.js";

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
 * How long a handed-off grant waits before its confirmation (or half of what
 * is left of its reservation, if that is sooner). Until the confirmation
 * lands, the store keeps the permit for the reservation only (the waiter
 * lease, 5 s by default), not a full lease: a holder whose process stalls
 * longer than that within this window loses it (and is told). A quarter of a
 * second keeps that window short, and still spares the extend to the many
 * bodies that end sooner.
 */
const CONFIRM_WITHIN_MS = 250;

/**
 * Turns a grant handed off from the queue (its holder started on the
 * announcement, without a claim round trip) into a full lease with an extend,
 * sent a little later rather than at once (see `CONFIRM_WITHIN_MS`): a body
 * that ends sooner gives the permit back with its release, and the extend
 * would only have cost a round trip (one of three per contended hand-off).
 * The rest of the reservation is left for the extend to land, retried while
 * it lasts. "Not ours" is a loss (told through the
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

  /** Arms the confirmation (again, after a release the store did not answer). */
  schedule(): void {
    if (this.#done || this.#due !== undefined) return;
    const now = performance.now();
    const wait = Math.min(CONFIRM_WITHIN_MS, Math.max(0, this.lease.deadline() - now) / 2);
    this.#due = backgroundTimers.at(now + wait, () => {
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
