#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Return a semaphore lease's permits, and admit waiters they make room for.
-- KEYS as semaphore-acquire.lua.  ARGV[1] token  ARGV[2] channel announcing grants
-- ARGV[3] the lease's weight, when the caller knows it (1 spares the weights lookup)
-- Returns 1 when the lease was live, 0 when it was gone or had lapsed (its
-- entry, if still present, is removed either way); {that, announcement} when
-- the release granted waiters.
local holders, weights, queue, info, expiry, tickets, limits = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local token, channel, weight = ARGV[1], ARGV[2], tonumber(ARGV[3])
--!include lib/clock.lua

-- The hot path, before any helper is defined: a weight-1 holder leaving an id
-- nobody waits for and nobody heavier holds. The key keeps its expiry: it
-- still vanishes with its latest lease.
if weight == 1 and redis.call('EXISTS', queue, weights) == 0 then
  local score = redis.call('ZSCORE', holders, token)
  if not score then return 0 end
  redis.call('ZREM', holders, token)
  if tonumber(score) <= now then return 0 end
  return 1
end

--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant-semaphore.lua

local score = holders_remove(token)
holders_prune(now)
local announced = nil
if redis.call('EXISTS', queue) == 1 then
  queue_prune(now)
  announced = grant(now, channel)
end
holders_expire(now)
queue_expire(now)
local live = 1
if not score or score <= now then live = 0 end
-- The grant's announcement goes to the releasing process too, in the reply:
-- a waiter of its own need not wait for pub/sub to deliver it.
if announced then return {live, announced} end
return live
