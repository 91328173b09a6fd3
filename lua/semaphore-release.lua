#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Return a semaphore lease's permits, and admit waiters they make room for: the full path
-- (semaphore-return.lua is the fast one).
-- KEYS as semaphore-acquire.lua.  ARGV[1] token  ARGV[2] its weight, or 0 when not known
-- ARGV[3] the ms it was held, -1 when not known
-- Returns {live, marked[, announcement]}: live is 1 when the lease was live, 0 when it was gone or
-- had lapsed (its members, if still present, are removed either way); marked says whether the id
-- still has waiters (the store's hint); the announcement names the waiters the release granted.
-- A live lease's hold is folded into the id's typical hold (lib/hold.lua).
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, weight, held = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]) or -1
--!include lib/clock.lua
--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

tenants_ready(now)
local score = holders_remove(token, weight > 0 and weight or nil)
if score and score > now and held >= 0 then hold_add(now, score, held) end
holders_prune(now)
queue_prune(now)
local announced = nil
if redis.call('EXISTS', queue) == 1 then announced = grant(now) end
local marked = settle(now)
local live = 1
if not score or score <= now then live = 0 end
-- The grant's announcement goes to the releasing process too, in the reply:
-- a waiter of its own need not wait for pub/sub to deliver it.
if announced then return {live, marked, announced} end
return {live, marked}
