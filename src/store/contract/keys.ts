/** The two primitives, each with keys of its own. */
export type KeyKind = "semaphore" | "lock";

/**
 * The store key of an id: `{<prefix>:<kind>:<id>}`. The braces are a Redis Cluster hash tag, so every
 * companion key (and the grant channel) of the id shares its slot. The kind is inside the tag so a
 * lock and a semaphore made with one prefix never meet on an id: a Redis key holds one type, and a
 * waiter hears the grants of its own kind only. A prefix has no `:`, and the kind is one word, so
 * the id is everything after the second `:` and no two (prefix, kind, id) share a key.
 */
export function storeKey(prefix: string, kind: KeyKind, id: string): string {
  return `{${prefix}:${kind}:${id}}`;
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

  constructor(
    readonly prefix: string,
    readonly kind: KeyKind,
  ) {}

  /** The store key of `id` under this prefix, for this kind. */
  of(id: string): string {
    let storeKeyOfId = this.#keys.get(id);
    if (storeKeyOfId === undefined) {
      if (this.#keys.size >= CACHED_KEYS) this.#keys.clear();
      storeKeyOfId = storeKey(this.prefix, this.kind, id);
      this.#keys.set(id, storeKeyOfId);
    }
    return storeKeyOfId;
  }
}
