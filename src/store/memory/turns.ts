/**
 * The waiting tenants' turns of one id in the embedded store (the `:qt` set
 * in Redis, lua/lib/grant.lua): the tag of each waiting tenant's next turn,
 * served lowest tag first, ties by name. The tenants that may be served sit
 * in a binary heap, so the next one costs O(log tenants) to find; a tenant
 * found at its cap is parked apart, keeping its tag, until it could fit again
 * (one of its permits returns, or its first waiter changes). Sorting every
 * waiting tenant on each grant, and reading each capped one again, made a
 * grant cost O(tenants log tenants).
 */
export class Turns {
  /** Tenants that may be served, as a min-heap by (tag, name). */
  readonly #heap: string[] = [];
  /** Every waiting tenant's tag, parked or not. */
  readonly #tags = new Map<string, number>();
  /** Each heap tenant's position in the heap. */
  readonly #at = new Map<string, number>();

  get size(): number {
    return this.#tags.size;
  }

  tag(tenant: string): number | undefined {
    return this.#tags.get(tenant);
  }

  /** The tenant to serve next and its tag (parked tenants excluded). */
  first(): [string, number] | undefined {
    const tenant = this.#heap[0];
    return tenant === undefined ? undefined : [tenant, this.#tags.get(tenant) as number];
  }

  /** A tenant joins with the tag of its first turn, or an unparked tenant moves to another. */
  set(tenant: string, tag: number): void {
    this.#tags.set(tenant, tag);
    const at = this.#at.get(tenant);
    if (at === undefined) {
      this.#heap.push(tenant);
      this.#at.set(tenant, this.#heap.length - 1);
      this.#up(this.#heap.length - 1);
    } else {
      this.#down(this.#up(at));
    }
  }

  delete(tenant: string): void {
    this.#tags.delete(tenant);
    this.#remove(tenant);
  }

  /** Out of the heap until {@link unpark}: the tenant is at its cap. */
  park(tenant: string): void {
    this.#remove(tenant);
  }

  /** Back into the heap with its tag, if it was parked. */
  unpark(tenant: string): void {
    const tag = this.#tags.get(tenant);
    if (tag !== undefined && !this.#at.has(tenant)) this.set(tenant, tag);
  }

  /** Every waiting tenant, parked ones included, in turn order (for inspection). */
  inOrder(): string[] {
    return [...this.#tags].sort((a, b) => before(a[1], a[0], b[1], b[0])).map(([tenant]) => tenant);
  }

  #remove(tenant: string): void {
    const at = this.#at.get(tenant);
    if (at === undefined) return;
    this.#at.delete(tenant);
    const last = this.#heap.pop() as string;
    if (at === this.#heap.length) return;
    this.#heap[at] = last;
    this.#at.set(last, at);
    this.#down(this.#up(at));
  }

  #less(i: number, j: number): boolean {
    const a = this.#heap[i] as string;
    const b = this.#heap[j] as string;
    return before(this.#tags.get(a) as number, a, this.#tags.get(b) as number, b) < 0;
  }

  #swap(i: number, j: number): void {
    const a = this.#heap[i] as string;
    const b = this.#heap[j] as string;
    this.#heap[i] = b;
    this.#heap[j] = a;
    this.#at.set(b, i);
    this.#at.set(a, j);
  }

  #up(i: number): number {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) break;
      this.#swap(i, parent);
      i = parent;
    }
    return i;
  }

  #down(i: number): void {
    for (;;) {
      const left = 2 * i + 1;
      let least = i;
      if (left < this.#heap.length && this.#less(left, least)) least = left;
      if (left + 1 < this.#heap.length && this.#less(left + 1, least)) least = left + 1;
      if (least === i) return;
      this.#swap(i, least);
      i = least;
    }
  }
}

/** Turn order: the lower tag first, ties by name. */
function before(tagA: number, a: string, tagB: number, b: string): number {
  return tagA - tagB || byCodePoint(a, b);
}

/**
 * Names in code point order, which is the order of their UTF-8 bytes: how Redis orders the
 * members of `:qt` at one score. JavaScript's `<` compares UTF-16 units instead, and puts a name
 * beyond U+FFFF ("😀") before one in U+E000–U+FFFF, where Redis puts it after.
 */
function byCodePoint(a: string, b: string): number {
  for (let i = 0; i < a.length && i < b.length; i++) {
    const x = a.codePointAt(i) as number;
    const y = b.codePointAt(i) as number;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}
