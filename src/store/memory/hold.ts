import type { AcquireReply } from "../contract/types.js";

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
 * Folds the hold of a live lease that ends at `ends`, held `heldMs`, into the
 * id's record (`hold_add` in lua/lib/holders.lua; the fold is lua/lib/hold.lua,
 * line for line).
 */
export function holdAdd(state: { hold: HoldRecord | undefined }, now: number, ends: number, heldMs: number): void {
  const record = state.hold;
  // Whole ms, as the Redis store sends it.
  const held = Math.round(heldMs);
  const avg = record !== undefined && record.until > now ? Math.floor((4 * record.avg + held + 2) / 5) : held;
  state.hold = { avg, until: Math.min(ends, now + Math.max(1000, 4 * avg)) };
}

/** Until when the id's state must be kept for its record (`hold_until`); undefined when it no longer counts. */
export function holdUntil(record: HoldRecord | undefined, now: number): number | undefined {
  return record !== undefined && record.until > now ? record.until : undefined;
}

/** A reply that did not acquire says the id's typical hold, at least 1 ms, while it counts (lua/lib/hold-read.lua). */
export function holdRead(reply: AcquireReply, record: HoldRecord | undefined, now: number): AcquireReply {
  if (!reply.acquired && record !== undefined && record.until > now) reply.holdMs = Math.max(1, record.avg);
  return reply;
}
