-- A waiter gives up (its wait expired, it was aborted, its client left): leave
-- the queue, return a grant it had not claimed yet, and admit those behind.
-- Also the clean-up of an acquire whose outcome is unknown.
-- KEYS as semaphore-acquire.lua.  ARGV[1] token  ARGV[2] channel announcing grants
-- Returns 1.
local holders, weights, queue, info, expiry, tickets, limits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, channel = ARGV[1], ARGV[2]
--!include lib/clock.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant-semaphore.lua

holders_remove(token)
queue_drop(token)
holders_prune(now)
queue_prune(now)
grant(now, channel)
holders_expire(now)
queue_expire(now)
return 1
