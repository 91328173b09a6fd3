/**
 * Whether a long-lived Map or Set that entries keep entering and leaving (a
 * holder, a waiter, a lease per call) is due to be copied into a new one:
 * after `deleted` removals since the last copy, at least 256 and at least
 * its size (so the copy costs O(1) per removal).
 *
 * Why copy at all: when V8 rehashes a Map or Set (a table full of removed
 * entries, on an insert), the old table keeps a link to the new one. Once the
 * map has lived long enough for its table to reach the old generation, that
 * table holds its successor alive through every young-generation collection,
 * which holds the next, each with the entries it had: in a process that
 * acquires and releases hundreds of thousands of times a second, a quarter
 * of what was allocated survived every scavenge until a full collection, and
 * each acquire cost 2x the CPU. A copy made
 * here has no such link: the chain ends at each copy.
 */
export function copyDue(deleted: number, size: number): boolean {
  return deleted >= 256 && deleted >= size;
}
