-- A waiter gives up: leave the queue, return a grant it had not claimed, and hand the lock to the
-- next waiter. Also the clean-up of an acquire whose outcome is unknown.
-- KEYS: as lock-acquire.lua.
-- ARGV: [1] token.
-- Reply: 1.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local token = ARGV[1]
--!include lib/clock.lua
local now, now_us = clock()
--!include lib/fence.lua
--!include lib/queue.lua
--!include lib/lock.lua

local holder, last, rest = lock_read()
if holder == token then lock_free(last, rest) end
if redis.call('ZSCORE', expiry, token) then queue_drop(token) end
queue_prune(now)
grant(now)
settle(now)
return 1
