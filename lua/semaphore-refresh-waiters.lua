-- One process's periodic call for all its waiters on one semaphore: keep their
-- waiter leases alive, reclaim lapsed holders and waiters, admit who fits.
-- KEYS as semaphore-acquire.lua.  ARGV[1] claim ms  ARGV[2] channel  ARGV[3..] tokens
-- Returns, per token: 1 holds (granted: claim it), 2 still waiting, 0 gone;
-- then the ms until the nearest lease ends (a grant's reservation included).
local holders, weights, queue, info, expiry, tickets, limits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local claim, channel = tonumber(ARGV[1]), ARGV[2]
--!include lib/clock.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant-semaphore.lua

-- A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
holders_prune(now)
queue_prune(now)
queue_refresh(ARGV, 3, claim, now)
grant(now, channel)
holders_expire(now)
queue_expire(now)
local statuses = {}
for i = 3, #ARGV do
  if redis.call('ZSCORE', holders, ARGV[i]) then
    statuses[#statuses + 1] = 1
  elseif redis.call('ZSCORE', queue, ARGV[i]) then
    statuses[#statuses + 1] = 2
  else
    statuses[#statuses + 1] = 0
  end
end
statuses[#statuses + 1] = holders_next(now)
return statuses
