/** The store key of an id: a Redis Cluster hash tag around prefix and id, so every companion key shares its slot. */
export function storeKey(prefix: string, id: string): string {
  return `{${prefix}:${id}}`;
}

/** Ids remembered per primitive before the cache starts over. */
const CACHED_KEYS = 10_000;

/**
 * The store keys of the ids one primitive sees, each made once: the same
 * string object each time, so a store hashes it once for its lookups (a new
 * string per call was a measurable share of an in-memory acquire).
 */
export class StoreKeys {
  readonly #keys = new Map<string, string>();

  constructor(readonly prefix: string) {}

  /** The store key of `id` under this prefix. */
  of(id: string): string {
    let storeKeyOfId = this.#keys.get(id);
    if (storeKeyOfId === undefined) {
      if (this.#keys.size >= CACHED_KEYS) this.#keys.clear();
      storeKeyOfId = storeKey(this.prefix, id);
      this.#keys.set(id, storeKeyOfId);
    }
    return storeKeyOfId;
  }
}
