/** The part of a Node socket that gathers writes. */
interface Corkable {
  cork(): void;
  uncork(): void;
  writable?: boolean;
}

/**
 * ioredis writes each command to its socket at once, one system call each:
 * the script calls of one turn (the takes and the returns of several ids,
 * each coalesced) go out in one write instead, by corking the socket until
 * the turn's microtasks have run. Nothing waits: the write is made in the
 * same turn. A single connection only (a Cluster has one socket per node).
 * A full batch is written at once (`now`): the server starts on it while the
 * turn goes on.
 * `stream` is ioredis's socket, not a documented part of its API: a client
 * without a corkable one is written to as before.
 */
export class TurnWrites {
  /** The socket corked until the end of this turn, if any. */
  #corked: Corkable | undefined;
  readonly #uncork = (): void => {
    const stream = this.#corked;
    this.#corked = undefined;
    stream?.uncork();
  };

  /** Writes what this turn gathered so far; a later call of the turn corks the socket again. */
  now(): void {
    this.#uncork();
  }

  gather(socket: unknown): void {
    if (this.#corked !== undefined) return;
    const stream = socket as Corkable | undefined;
    if (typeof stream?.cork !== "function" || stream.writable !== true) return;
    stream.cork();
    this.#corked = stream;
    process.nextTick(this.#uncork);
  }
}
