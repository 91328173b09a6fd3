-- The id's typical hold time, shared by every process on the store, so that a process that has seen
-- no request finish can still say when a retry is likely to succeed (a refusal answers it). No key of
-- its own (no key outlives an idle id): a record '<avg>:<at>:<until>' (ms; written at `at`; it counts
-- while now < until) lives in the id's keys, as the marker '~h<record>' at score -inf in a
-- semaphore's holders set, or as the suffix ' <record>' of a lock's value, and those keys are kept
-- while it counts: a few holds after its last write (at least a second), never past the end of the
-- lease whose release wrote it, so never past the longest lease taken on the id.
-- Only a live lease's release counts, and to keep releases lean it writes at most every 100 ms per
-- id: a release within 100 ms of the last write leaves the record as it is (its hold is not
-- counted). A write folds the hold in: avg' = round((4 avg + held) / 5), or held alone when no
-- record counts; until' = min(the lease's end, now + max(1000, 4 avg')).
-- This fragment is that fold, inline (the fast paths define no helper). Expects the locals `avg`,
-- `at` and `upto` (the record's figures, parsed once by the caller: nil when there is none), now,
-- `ends` (the released lease's end), `held` (ms it was held, >= 0) and `wrote`; sets the figures
-- anew and `wrote` to true when it writes.
if not upto or upto <= now or now - at >= 100 then
  if upto and upto > now then avg = math.floor((4 * avg + held + 2) / 5) else avg = math.floor(held) end
  at, upto, wrote = now, math.min(ends, now + math.max(1000, 4 * avg)), true
end
