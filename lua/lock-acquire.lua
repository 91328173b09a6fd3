#!lua
-- Take a lock, or join its waiting room, or say how long it stays held. The shebang has no
-- allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The lock key's value is '<token> <fence>' (lib/fence.lua), or '~ <fence>' for a free lock that
-- keeps its last fence until the clock has passed it, either followed by ' <record>', the lock's
-- typical hold (lib/hold.lua), which it keeps while that counts. A lease that ends at `e` is the
-- key with PXAT e - 1: Redis drops a key once its time is past PXAT, so the lock is held while
-- now < e, as everywhere else (scores, the memory store).
-- KEYS: [1] lock, [2] meta, [3] queue, [4] expiry (see lib/queue.lua).
-- ARGV: [1] token, [2] ttl ms, [3] claim ms (waiter lease; 0 fails fast), [4] max queue length (0
--   for none).
-- Reply: {1, 0, fence} when the token holds the lock, {2, ms, hold} when it waits, {0, ms, hold}
--   when refused, {3, ms, hold} when the queue is full; ms until the lock expires, hold the lock's
--   typical hold in ms (lib/hold.lua; 0: none). A token already holding (a re-sent acquire, a
--   claim) keeps its fence.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
local token, ttl, claim, maxQueue = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
--!include lib/clock.lua
local now, now_us = clock()

-- The common case first, before the waiting room's helpers are defined: nobody waiting.
if redis.call('EXISTS', queue) == 0 then
  local value = redis.call('GET', lock)
  local holder, last, rest = nil, 0, ''
  if value then
    local who, fence, tail = string.match(value, '^(%S+) (%d+)(.*)$')
    holder, last, rest = who, tonumber(fence), tail
  end
  if not holder or holder == '~' then
    -- Free (or lapsed): now ours, expiring on the server's clock; the typical hold stays.
    local fence = math.max(last + 1, now_us)
    redis.call('SET', lock, token .. ' ' .. string.format('%.0f', fence) .. rest, 'PXAT', now + ttl - 1)
    return {1, 0, fence}
  end
  -- A re-sent acquire (ioredis replays unanswered commands after a reconnect) finds its own token.
  if holder == token then
    redis.call('PEXPIREAT', lock, now + ttl - 1)
    return {1, 0, last}
  end
  if claim == 0 then
--!include lib/hold-read.lua
    return {0, math.max(1, redis.call('PEXPIRETIME', lock) + 1 - now), hold_read(rest, now)}
  end
end

--!include lib/fence.lua
--!include lib/queue.lua
--!include lib/lock.lua

local waiting = redis.call('EXISTS', queue) == 1
if waiting then
  queue_prune(now)
  grant(now)
  waiting = redis.call('EXISTS', queue) == 1
end

local reply
local holder, last, rest = lock_read()
if holder == token then
  -- A re-sent acquire, or a waiter claiming its grant: refresh instead of failing.
  redis.call('PEXPIREAT', lock, now + ttl - 1)
  reply = {1, 0, last}
elseif waiting and redis.call('ZSCORE', expiry, token) then
  redis.call('ZADD', expiry, now + claim, token)
  reply = {2, 0, 0}
elseif not waiting and not holder then
  -- A newcomer never jumps a non-empty queue.
  reply = {1, 0, lock_take(token, now + ttl, last, rest)}
elseif claim == 0 then
  reply = {0, 0, 0}
elseif maxQueue > 0 and redis.call('ZCARD', queue) >= maxQueue then
  reply = {3, 0, 0}
else
  queue_join(token, 1, 1, 0, now + claim)
  reply = {2, 0, 0}
end
settle(now)
if reply[1] ~= 1 then
  reply[2] = lock_next(now)
  local _, _, record = lock_read()
--!include lib/hold-read.lua
  reply[3] = hold_read(record, now)
end
return reply
