/**
 * An id's typical hold time, as the embedded store keeps it: the same record
 * and the same rules as the scripts' (lua/lib/hold.lua), so both stores
 * answer a refusal alike. It counts while `now < until`.
 */
export interface HoldRecord {
  /** Ms, a whole number. */
  avg: number;
  until: number;
}

/**
 * The record after a live lease that ends at `ends` was released, having
 * been held `heldMs`: lua/lib/hold.lua, line for line.
 */
export function foldHold(record: HoldRecord | undefined, now: number, ends: number, heldMs: number): HoldRecord {
  // Whole ms, as the Redis store sends it.
  const held = Math.round(heldMs);
  const avg = record !== undefined && record.until > now ? Math.floor((4 * record.avg + held + 2) / 5) : held;
  return { avg, until: Math.min(ends, now + Math.max(1000, 4 * avg)) };
}

/** What a refusal says of it: the average, at least 1 ms, while it counts. */
export function holdMsOf(record: HoldRecord | undefined, now: number): number | undefined {
  return record !== undefined && record.until > now ? Math.max(1, record.avg) : undefined;
}

/** Until when the id's state must be kept for it; undefined when it no longer counts. */
export function holdKeptUntil(record: HoldRecord | undefined, now: number): number | undefined {
  return record !== undefined && record.until > now ? record.until : undefined;
}
