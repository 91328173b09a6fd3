-- A waiter gives up (its wait expired, it was aborted, its client left): leave the queue, return a
-- grant it had not claimed yet, and admit those behind. Also the clean-up of an acquire whose
-- outcome is unknown.
-- KEYS: as semaphore-acquire.lua.
-- ARGV: [1] token.
-- Reply: 1.
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token = ARGV[1]
--!include lib/clock.lua
local now, now_us = clock()
--!include lib/hold.lua
--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

tenants_ready(now)
holders_remove(token, nil)
if redis.call('ZSCORE', expiry, token) then queue_drop(token) end
holders_prune(now)
queue_prune(now)
if redis.call('EXISTS', queue) == 1 then grant(now) end
settle(now)
return 1
