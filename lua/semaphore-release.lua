#!lua flags=allow-oom
-- Return semaphore leases' permits, and admit waiters they make room for: the full path
-- (semaphore-release-fast.lua is the fast one), for one lease or several issued together on one
-- id. A live lease's hold is folded into the id's typical hold (lib/hold.lua). allow-oom: under
-- maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- The outcome is that of one such call per lease, in ARGV's order, at one server time: each lease
-- is removed and grants what it frees before the next one is (the same waiters, in the same
-- order, with the same fences and announcements). What runs once is what another release at the
-- same time would redo to no effect: the clock, the marker read, pruning (nothing lapses between
-- them: a grant's lease ends after now), the tenant index's check (it can only be found missing
-- before the first, by eviction) and settle (which only writes markers and expiries from the
-- state it finds; the state it would leave empty stays empty: every lease still to go was pruned).
-- KEYS: as semaphore-acquire.lua.
-- ARGV: per lease, token, its weight (0 when not known) and the ms it was held (-1 when not known)
--   (three each).
-- Reply: {live..., marked, announcement...}: per lease, 1 when it was live, 0 when it was gone or
--   had lapsed (its members, if still present, are removed either way), or 'ERR <message>' when
--   its release failed (the others still go: one call each would have); marked says whether the id
--   still has waiters (the store's hint); then the announcement of each release that granted
--   waiters.
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
--!include lib/clock.lua
local now, now_us = clock()
--!include lib/hold.lua
--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

tenants_ready(now)
holders_prune(now)
queue_prune(now)
-- What the grants need, read once and kept in step: the id's limit and the permits held.
local waiting, known = false, nil
local function reread()
  waiting = redis.call('EXISTS', queue) == 1
  known = nil
  if waiting then known = { limit = tonumber(redis.call('HGET', meta, '~l')), used = holders_used() } end
end
reread()
-- Whether the next lease is the first of the call, or follows one that failed: it grants what was
-- freed before it too (pruning, or the failed one's writes).
local fresh = true

-- One lease: its live flag (1 or 0) and the announcement of what it granted, if anything.
local function release(i)
  local token, weight, held = ARGV[i], tonumber(ARGV[i + 1]), -1
  if ARGV[i + 2] ~= '-1' then held = tonumber(ARGV[i + 2]) end
  local score, removed = holders_remove(token, weight > 0 and weight or nil)
  local live = 0
  if score and score > now then
    live = 1
    if held >= 0 then hold_add(now, score, held) end
  end
  -- A lease already gone frees nothing for the grants.
  local announcement = nil
  if waiting and (score or fresh) then
    if score then known.used = known.used - removed end
    local granted, _, used = grant(now, nil, nil, known)
    announcement, known.used = granted, used
  end
  return live, announcement
end

local out, announced = {}, {}
for i = 1, #ARGV, 3 do
  local ok, live, announcement = pcall(release, i)
  if ok then
    out[#out + 1] = live
    if announcement then announced[#announced + 1] = announcement end
    fresh = false
  else
    -- This lease's caller gets the error, as a call of its own would (its writes so far stay: a
    -- script is not rolled back); the next lease starts from what is stored, as its own call would.
    out[#out + 1] = 'ERR ' .. (type(live) == 'table' and tostring(live.err) or tostring(live))
    marks_forget()
    reread()
    fresh = true
  end
end
out[#out + 1] = settle(now)
-- The grants' announcements go to the releasing process too, in the reply: a waiter of its own
-- need not wait for pub/sub to deliver them.
for i = 1, #announced do out[#out + 1] = announced[i] end
return out
