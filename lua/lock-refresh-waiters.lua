-- One process's periodic call for all its waiters on one lock: keep their waiter
-- leases alive, drop lapsed waiters, hand a free lock to the head.
-- KEYS as lock-acquire.lua.  ARGV[1] claim ms  ARGV[2..] tokens
-- Returns, per token: 1 holds (granted: claim it), 2 still waiting, 0 gone;
-- then the ms until the lock's lease ends (a grant's reservation included).
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local claim = tonumber(ARGV[1])
--!include lib/clock.lua
--!include lib/queue.lua
--!include lib/settle-lock.lua

-- A waiter whose lease lapsed is gone, even if its process is back: it rejoins at the back.
queue_prune(now)
queue_refresh(ARGV, 2, claim, now)
grant(now)
settle(now)
local holder = redis.call('GET', lock)
local statuses = {}
for i = 2, #ARGV do
  if holder == ARGV[i] then
    statuses[#statuses + 1] = 1
  elseif redis.call('ZSCORE', expiry, ARGV[i]) then
    statuses[#statuses + 1] = 2
  else
    statuses[#statuses + 1] = 0
  end
end
statuses[#statuses + 1] = math.max(1, redis.call('PEXPIRETIME', lock) + 1 - now)
return statuses
