/** What a `Slots` keeps: an entry that knows its token and where it sits. */
export interface Slotted {
  readonly token: string;
  /** Its index in `Slots.entries` (-1 once removed): a handle's check and an O(1) removal. */
  slot: number;
}

/** Up to this many entries, a lookup by token compares tokens (random: the first character mostly differs) rather than index them. */
const SCAN_MAX = 32;

/**
 * An id's holders or waiters, by token, without hashing tokens on the engine's
 * path: a token is a fresh 45-character string, and V8 flattens and hashes a
 * new string key over its whole length (in a Map by token, 12% of an
 * in-process acquire + release; 7% more for a queued wait). The entries sit
 * in an array, in no particular order (a removal moves the last into the
 * slot); the engine of this process keeps the record it was given and hands
 * it back (see `own`). A lookup by token alone (the Store contract, a re-sent
 * acquire, a leave) compares tokens among few entries, and among many goes
 * through an index, built on the first such lookup and kept while any entry is.
 *
 * @example
 * ```ts
 * const holders = new Slots<Holder>();
 * const held = holders.add({ token, slot: 0, ... });
 * holders.own(token, held); // held, without a lookup
 * holders.remove(held);
 * ```
 */
export class Slots<Entry extends Slotted> {
  /** Read-only outside: iterate it, never change it. */
  readonly entries: Entry[] = [];
  #byToken: Map<string, Entry> | undefined;

  get size(): number {
    return this.entries.length;
  }

  /** Adds an entry (its `slot` is set here); returns it. */
  add(entry: Entry): Entry {
    entry.slot = this.entries.length;
    this.entries.push(entry);
    this.#byToken?.set(entry.token, entry);
    return entry;
  }

  /** Removes an entry; false for one not here (or no longer), left alone. */
  remove(entry: Entry): boolean {
    const entries = this.entries;
    if (entries[entry.slot] !== entry) return false;
    const last = entries.pop() as Entry;
    if (last !== entry) {
      entries[entry.slot] = last;
      last.slot = entry.slot;
    }
    entry.slot = -1;
    if (this.#byToken !== undefined) {
      if (entries.length === 0) this.#byToken = undefined;
      else this.#byToken.delete(entry.token);
    }
    return true;
  }

  /** `token`'s entry, looked up by token alone. */
  find(token: string): Entry | undefined {
    let byToken = this.#byToken;
    if (byToken === undefined) {
      if (this.entries.length <= SCAN_MAX) {
        for (const entry of this.entries) if (entry.token === token) return entry;
        return undefined;
      }
      byToken = new Map();
      for (const entry of this.entries) byToken.set(entry.token, entry);
      this.#byToken = byToken;
    }
    return byToken.get(token);
  }

  /**
   * `token`'s entry: `held`, a record the engine kept, when it is still here
   * and carries that very token (a stale or foreign handle is not trusted:
   * the token decides, as for any caller); else found by token.
   */
  own(token: string, held: unknown): Entry | undefined {
    if (held !== undefined) {
      const entry = held as Entry;
      if (this.entries[entry.slot] === entry && entry.token === token) return entry;
    }
    return this.find(token);
  }

  /**
   * Removes (with `drop`) every entry whose lease ended by `now`; returns the
   * earliest lease end left (Infinity: none), below which the next prune can
   * be skipped. Holders and waiters lapse alike (lua: ZREMRANGEBYSCORE up to now).
   */
  prune(this: Slots<Entry & { expiresAt: number }>, now: number, drop: (entry: Entry) => void): number {
    let earliest = Number.POSITIVE_INFINITY;
    const entries = this.entries;
    // From the end: a removal moves the last entry, one already seen and kept, into the slot.
    for (let at = entries.length - 1; at >= 0; at--) {
      const entry = entries[at] as Entry & { expiresAt: number };
      if (entry.expiresAt <= now) drop(entry);
      else if (entry.expiresAt < earliest) earliest = entry.expiresAt;
    }
    return earliest;
  }
}
