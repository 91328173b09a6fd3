-- A waiter gives up: leave the queue, return a grant it had not claimed, and
-- hand the lock to the next waiter. Also the clean-up of an acquire whose outcome is unknown.
-- KEYS as lock-acquire.lua.  ARGV[1] token  ARGV[2] channel announcing grants
-- Returns 1.
local lock, queue, info, expiry, tickets = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, channel = ARGV[1], ARGV[2]
local limits = nil
--!include lib/clock.lua
--!include lib/queue.lua
--!include lib/grant-lock.lua

if redis.call('GET', lock) == token then redis.call('DEL', lock) end
queue_drop(token)
queue_prune(now)
grant(now, channel)
queue_expire(now)
return 1
