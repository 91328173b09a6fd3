/**
 * Which releases say how long their lease was held. Each one that does makes
 * the store write the id's typical hold (lua/lib/hold.lua); one every 100 ms
 * per id and process keeps the average current, and spares a busy id's other
 * releases the work of reading and rewriting it.
 */
const EVERY_MS = 100;
/** Ids remembered before the table starts over (forgetting only sends one hold more). */
const REMEMBERED = 10_000;

const lastSent = new Map<string, number>();

/**
 * The hold, in whole ms from `heldSince` to `now` (both `performance.now()`
 * readings), to pass with a release on `storeKey`; undefined when this
 * process passed one on it less than 100 ms ago.
 */
export function holdToReport(storeKey: string, heldSince: number, now: number): number | undefined {
  const last = lastSent.get(storeKey);
  if (last !== undefined && now - last < EVERY_MS) return undefined;
  if (lastSent.size >= REMEMBERED) lastSent.clear();
  lastSent.set(storeKey, now);
  return Math.round(now - heldSince);
}
