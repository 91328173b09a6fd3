interface Waiting<R> {
  resolve(value: R): void;
  reject(error: unknown): void;
}

interface Group<I, R> {
  /** Calls of this group sent and not yet answered. */
  inFlight: number;
  /** Items issued while enough were in flight, to go out together at the end of this turn. */
  items: I[];
  waiting: Waiting<R>[];
}

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
 * Measured side by side (bench/README.md): gathering in the same turn beats a
 * `setImmediate` batch, which made concurrency 8 slower than no batching.
 */
export class Coalescer<I, R> {
  readonly #groups = new Map<string, Group<I, R>>();

  constructor(
    private readonly threshold: number,
    private readonly send: (group: string, items: I[]) => Promise<readonly R[]>,
  ) {}

  call(name: string, item: I): Promise<R> {
    let group = this.#groups.get(name);
    if (group === undefined) {
      group = { inFlight: 0, items: [], waiting: [] };
      this.#groups.set(name, group);
    }
    if (group.inFlight < this.threshold && group.items.length === 0) {
      return this.#dispatch(name, group, [item], true) as Promise<R>;
    }
    const current = group;
    return new Promise<R>((resolve, reject) => {
      if (current.items.length === 0) queueMicrotask(() => this.#flush(name, current));
      current.items.push(item);
      current.waiting.push({ resolve, reject });
    });
  }

  #flush(name: string, group: Group<I, R>): void {
    const { items, waiting } = group;
    group.items = [];
    group.waiting = [];
    (this.#dispatch(name, group, items, false) as Promise<readonly R[]>).then(
      (replies) => {
        for (let i = 0; i < waiting.length; i++) (waiting[i] as Waiting<R>).resolve(replies[i] as R);
      },
      (error: unknown) => {
        for (const one of waiting) one.reject(error);
      },
    );
  }

  /** Sends `items`; answers the replies, or the first alone when `one` (a call that went at once: one promise less). */
  #dispatch(name: string, group: Group<I, R>, items: I[], one: boolean): Promise<readonly R[] | R> {
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
        done();
        if (!Array.isArray(replies) || replies.length !== items.length) {
          throw new Error(`a coalesced call of ${items.length} answered ${JSON.stringify(replies)}`);
        }
        return one ? (replies[0] as R) : replies;
      },
      (error: unknown) => {
        done();
        throw error;
      },
    );
  }
}
