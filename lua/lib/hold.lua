-- The id's typical hold time, shared by every process on the store, so that a process that has seen
-- no request finish can still say when a retry is likely to succeed (a refusal answers it). No key of
-- its own (no key outlives an idle id): a record '<avg>:<until>' (ms; it counts while now < until)
-- lives in the id's keys, as the marker '~h<record>' at score -inf in a semaphore's holders set, or
-- as the suffix ' <record>' of a lock's value, and those keys are kept while it counts: a few holds
-- after its last write (at least a second), never past the end of the lease whose release wrote it,
-- so never past the longest lease taken on the id.
-- A live lease's release that says how long it was held writes it (the engine says so at most every
-- 100 ms per id and process, so a busy id's releases mostly leave it alone and never parse it).

-- The record's figures after a live lease that ended at `ends` was held `held` ms (>= 0): `avg` and
-- `upto` are the record's figures (nil when there is none). avg' = round((4 avg + held) / 5), or
-- held alone when no record counts; until' = min(the lease's end, now + max(1000, 4 avg')).
local function hold_fold(avg, upto, now, ends, held)
  if upto and upto > now then avg = math.floor((4 * avg + held + 2) / 5) else avg = math.floor(held) end
  return avg, math.min(ends, now + math.max(1000, 4 * avg))
end
