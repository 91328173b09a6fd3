/** What a caller's answer is made of: its reply and its own item (a stable function, not a closure per call). */
type Finish<I, R, T> = (reply: R, item: I) => T | PromiseLike<T>;

interface Waiting<I, R> {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  finish: Finish<I, R, unknown>;
}

interface Group<I, R> {
  /** Calls of this group sent and not yet answered. */
  inFlight: number;
  /** Items issued while enough were in flight, to go out together at the end of this turn. */
  items: I[];
  waiting: Waiting<I, R>[];
}

const asIs = <R>(reply: R): R => reply;

/**
 * Sends calls of one kind on one id as one script call with many items, when
 * several are issued in the same turn of the event loop while at least
 * `threshold` calls of the group are already out; below that, each goes at
 * once, so a quiet id never waits for company. Every caller gets its own
 * answer (the reply's item at its position) or the shared call's failure,
 * which the engine turns into `StoreUnavailableError` and the per-token
 * clean-up, as for a call of its own. A group is one id of one store, so a
 * batch never mixes Redis Cluster hash slots.
 *
 * Measured side by side: gathering in the same turn beats a `setImmediate`
 * batch, which made concurrency 8 slower than no batching.
 * A batch that reaches `maxBatch` items goes at once, in the middle of the
 * turn: the server starts on it while this process is still making the rest
 * (one batch per turn kept the two sides taking turns, each idle while the
 * other worked). For the same reason
 * nothing holds writes back for the end of the turn: the calls that go at
 * once reach the server at once.
 */
export class Coalescer<I, R> {
  readonly #groups = new Map<string, Group<I, R>>();

  /**
   * `later` schedules a batch's sending. By default: at the end of the current microtasks, which
   * gathers the calls made from one callback (a socket's replies), and a batch that is then still a
   * single call waits for the end of the turn (`setImmediate`), gathering the calls that other
   * callbacks of the same turn make: an HTTP server's requests each arrive in a socket callback of
   * their own, so each of their acquires would be a script call of its own (1.13 script calls per
   * request, against 0.22 to 0.26 gathered). It waits only while `threshold` calls of its group are out, whose round trip it
   * would wait behind anyway. `setImmediate` alone gathers the calls of a whole turn of the event
   * loop, timers' callbacks included (Node drains the microtasks after each timer's callback).
   */
  constructor(
    private readonly threshold: number,
    private readonly send: (group: string, items: I[]) => Promise<readonly R[]>,
    private readonly maxBatch = Number.POSITIVE_INFINITY,
    private readonly later?: (flush: () => void) => void,
  ) {}

  /**
   * Sends `item` with the others of its group, and answers `finish(reply, item)`: the caller's own
   * answer is made where its reply is handed out, not in a `.then` of the caller's (one promise and
   * one turn less per call). `finish` may answer a promise (a follow-up call), which is adopted.
   */
  call(name: string, item: I): Promise<R>;
  call<T>(name: string, item: I, finish: Finish<I, R, T>): Promise<T>;
  call(name: string, item: I, finish: Finish<I, R, unknown> = asIs): Promise<unknown> {
    let group = this.#groups.get(name);
    if (group === undefined) {
      group = { inFlight: 0, items: [], waiting: [] };
      this.#groups.set(name, group);
    }
    if (group.inFlight < this.threshold && group.items.length === 0) {
      return this.#dispatch(name, group, [item], finish);
    }
    const current = group;
    return new Promise((resolve, reject) => {
      if (current.items.length === 0) {
        if (this.later !== undefined) this.later(() => this.#flush(name, current));
        else queueMicrotask(() => this.#flushOrWait(name, current));
      }
      current.items.push(item);
      current.waiting.push({ resolve, reject, finish });
      // The microtask queued for this batch then finds the next one (or none), and sends it early.
      if (current.items.length >= this.maxBatch) this.#flush(name, current);
    });
  }

  /**
   * Calls gathered and not yet sent go out before anything acts on a reply of their group: a reply
   * can start a follow-up call (the fast path's "take the full script"), which must not overtake
   * calls made before it. (A batch waiting for the end of the turn can otherwise meet the replies
   * first: calls made in a `setImmediate` callback wait for the next turn's, after its I/O.) Only
   * with the default schedule: a `later` of the caller's own keeps its batches as it schedules them.
   */
  #sendWaiting(name: string, group: Group<I, R>): void {
    if (this.later === undefined && group.items.length > 0) this.#flush(name, group);
  }

  /** The default schedule's first look, at the end of the microtasks: a lone call waits for the turn's end. */
  #flushOrWait(name: string, group: Group<I, R>): void {
    if (group.items.length === 1 && group.inFlight >= this.threshold) setImmediate(() => this.#flush(name, group));
    else this.#flush(name, group);
  }

  #flush(name: string, group: Group<I, R>): void {
    const { items, waiting } = group;
    if (items.length === 0) return;
    group.items = [];
    group.waiting = [];
    (this.#dispatch(name, group, items, undefined) as Promise<readonly R[]>).then(
      (replies) => {
        for (let i = 0; i < waiting.length; i++) {
          const one = waiting[i] as Waiting<I, R>;
          try {
            one.resolve(one.finish(replies[i] as R, items[i] as I));
          } catch (error) {
            one.reject(error);
          }
        }
      },
      (error: unknown) => {
        for (const one of waiting) one.reject(error);
      },
    );
  }

  /**
   * Sends `items`; answers the replies, or with `finish` (a call that went at once, alone) its own
   * answer: one promise less.
   */
  #dispatch(name: string, group: Group<I, R>, items: I[], finish: Finish<I, R, unknown> | undefined): Promise<unknown> {
    group.inFlight++;
    let sent: Promise<readonly R[]>;
    try {
      sent = this.send(name, items);
    } catch (error) {
      sent = Promise.reject(error);
    }
    const done = () => {
      group.inFlight--;
      if (group.inFlight === 0 && group.items.length === 0 && this.#groups.get(name) === group) this.#groups.delete(name);
    };
    return sent.then(
      (replies) => {
        this.#sendWaiting(name, group);
        done();
        if (!Array.isArray(replies) || replies.length !== items.length) {
          throw new Error(`a coalesced call of ${items.length} answered ${JSON.stringify(replies)}`);
        }
        return finish === undefined ? replies : finish(replies[0] as R, items[0] as I);
      },
      (error: unknown) => {
        this.#sendWaiting(name, group);
        done();
        throw error;
      },
    );
  }
}
