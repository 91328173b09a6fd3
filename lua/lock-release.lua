#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Delete a lock if the token still holds it (an expired holder must never delete
-- its successor's lock), then hand it to the head waiter.
-- KEYS as lock-acquire.lua.  ARGV[1] token
-- Returns 1 when released, 0 when the lock had already moved on; {that,
-- announcement} when the release handed the lock to a waiter.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local token = ARGV[1]

local ours = redis.call('GET', lock) == token
if ours then redis.call('DEL', lock) end
-- The hot path ends here, before any helper is defined: nobody waiting.
if redis.call('EXISTS', queue) == 0 then
  if ours then return 1 end
  return 0
end

--!include lib/clock.lua
--!include lib/queue.lua
--!include lib/settle-lock.lua

queue_prune(now)
local announced = grant(now)
settle(now)
local released = 0
if ours then released = 1 end
-- The grant's announcement goes to the releasing process too (see semaphore-release.lua).
if announced then return {released, announced} end
return released
