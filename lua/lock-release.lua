#!lua flags=allow-oom
-- Free a lock if the token still holds it (an expired holder must never free its successor's
-- lock), then hand it to the head waiter. The hold is folded into the lock's typical hold
-- (lib/hold.lua). allow-oom: under maxmemory with noeviction, a holder must still be able to keep
-- and return what it holds.
-- KEYS: as lock-acquire.lua.
-- ARGV: [1] token, [2] the ms it was held (-1 when not known).
-- Reply: 1 when released, 0 when the lock had already moved on; {that, announcement} when the
--   release handed the lock to a waiter.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local token, held = ARGV[1], tonumber(ARGV[2]) or -1
--!include lib/clock.lua
local now, now_us = clock()

-- The hot path first, before the waiting room's helpers are defined: nobody waiting. (Value, fence
-- and typical hold: see lock-acquire.lua; the key stays, free, while the clock has not passed the
-- fence or while the typical hold counts.)
local ours = false
local value = redis.call('GET', lock)
if value then
  local who, fence, rest = string.match(value, '^(%S+) (%d+)(.*)$')
  if who == token then
    ours = true
    fence = tonumber(fence)
    local avg, upto = string.match(rest, '^ (%d+):(%d+)$')
    avg, upto = tonumber(avg), tonumber(upto)
    if held >= 0 then
      -- The lease ends one ms after the key's PXAT (see lock-acquire.lua).
--!include lib/hold.lua
      avg, upto = hold_fold(avg, upto, now, redis.call('PEXPIRETIME', lock) + 1, held)
    end
    local keep = nil
    if fence >= now_us then keep = math.floor(fence / 1000) + 1 end
    if upto and upto > now and (not keep or upto - 1 > keep) then keep = upto - 1 end
    if keep then
      local record = ''
      if upto then record = string.format(' %d:%d', avg, upto) end
      redis.call('SET', lock, '~ ' .. string.format('%.0f', fence) .. record, 'PXAT', keep)
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
--!include lib/lock.lua

queue_prune(now)
local announced = grant(now)
settle(now)
local released = 0
if ours then released = 1 end
-- The grant's announcement goes to the releasing process too (see semaphore-release.lua).
if announced then return {released, announced} end
return released
