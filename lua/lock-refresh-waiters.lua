-- One process's periodic call for all its waiters on one lock: keep their waiter leases alive, drop
-- lapsed waiters, hand a free lock to the head.
-- KEYS: as lock-acquire.lua.
-- ARGV: [1] claim ms, [2..] tokens.
-- Reply: per token, its status and a fence: 1 holds (granted: start, or claim it) with its grant's
--   fence, 2 still waiting or 0 gone, with 0; then the ms until the lock's lease ends (a grant's
--   reservation included).
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local claim = tonumber(ARGV[1])
--!include lib/clock.lua
local now, now_us = clock()
--!include lib/fence.lua
--!include lib/queue.lua
--!include lib/lock.lua

-- A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
queue_prune(now)
queue_refresh(ARGV, 2, claim, now)
grant(now)
settle(now)
local holder, fence = lock_read()
local statuses = {}
for i = 2, #ARGV do
  if holder == ARGV[i] then
    statuses[#statuses + 1] = 1
    statuses[#statuses + 1] = fence
  elseif redis.call('ZSCORE', expiry, ARGV[i]) then
    statuses[#statuses + 1] = 2
    statuses[#statuses + 1] = 0
  else
    statuses[#statuses + 1] = 0
    statuses[#statuses + 1] = 0
  end
end
statuses[#statuses + 1] = lock_next(now)
return statuses
