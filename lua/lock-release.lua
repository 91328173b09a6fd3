#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Free a lock if the token still holds it (an expired holder must never free its successor's
-- lock), then hand it to the head waiter.
-- KEYS as lock-acquire.lua.  ARGV[1] token
-- Returns 1 when released, 0 when the lock had already moved on; {that, announcement} when the
-- release handed the lock to a waiter.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local token = ARGV[1]
--!include lib/clock.lua

-- The hot path first, before any helper is defined: nobody waiting. (Value and fence: see
-- lock-acquire.lua; the key stays, free, while the clock has not passed the fence.)
local ours = false
local value = redis.call('GET', lock)
if value then
  local who, fence = string.match(value, '^(%S+) (%d+)$')
  if (who or value) == token then
    ours = true
    fence = tonumber(fence) or 0
    if fence >= now_us then
      redis.call('SET', lock, '~ ' .. string.format('%.0f', fence), 'PXAT', math.floor(fence / 1000) + 1)
    else
      redis.call('DEL', lock)
    end
  end
end
if redis.call('EXISTS', queue) == 0 then
  if ours then return 1 end
  return 0
end

--!include lib/fence.lua
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
