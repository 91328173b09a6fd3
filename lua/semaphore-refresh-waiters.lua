-- One process's periodic call for all its waiters on one semaphore: keep their waiter leases alive,
-- reclaim lapsed holders and waiters, admit who fits.
-- KEYS: as semaphore-acquire.lua.
-- ARGV: [1] claim ms, [2..] tokens.
-- Reply: per token, its status and a fence: 1 holds (granted: start, or claim it) with a new fence
--   (lib/fence.lua: its grant's was announced, and may not have been heard), 2 still waiting or 0
--   gone, with 0; then the ms until the nearest lease ends (a grant's reservation included).
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local claim = tonumber(ARGV[1])
--!include lib/clock.lua
local now, now_us = clock()
--!include lib/hold.lua
--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

-- A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
tenants_ready(now)
holders_prune(now)
queue_prune(now)
queue_refresh(ARGV, 2, claim, now)
if redis.call('EXISTS', queue) == 1 then grant(now) end
local statuses = {}
for i = 2, #ARGV do
  if redis.call('ZSCORE', holders, ARGV[i]) then
    statuses[#statuses + 1] = 1
    statuses[#statuses + 1] = fence_next()
  elseif redis.call('ZSCORE', expiry, ARGV[i]) then
    statuses[#statuses + 1] = 2
    statuses[#statuses + 1] = 0
  else
    statuses[#statuses + 1] = 0
    statuses[#statuses + 1] = 0
  end
end
settle(now)
statuses[#statuses + 1] = holders_next(now)
return statuses
