#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- Take permits of a semaphore, or join its waiting room, or say how long until one frees:
-- the full path, for waiting, and for ids with waiters.
-- KEYS[1] holders (see lib/holders.lua)  KEYS[2] meta  KEYS[3] queue  KEYS[4] expiry  (see lib/queue.lua)
-- ARGV[1] token  ARGV[2] limit  ARGV[3] weight  ARGV[4] lease ms
-- ARGV[5] claim ms: the waiter lease; 0 fails fast instead of queueing
-- ARGV[6] max queue length, 0 for none
-- Returns {1, 0} when the token holds its permits, {2, ms} when it waits in the
-- queue, {0, ms} when refused, {3, ms} when the queue is full; ms is the time
-- until the nearest lease ends. A third item, 1 or 0, says whether the id still has
-- waiters (the marker; see lib/settle.lua): the store's hint.
local holders, meta, queue, expiry = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local info = meta
local token, limit, weight, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local claim, maxQueue = tonumber(ARGV[5]), tonumber(ARGV[6])
--!include lib/clock.lua

if not redis.call('ZSCORE', holders, '~') then
--!include lib/take-one.lua
end

--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

holders_prune(now)
local waiting = redis.call('EXISTS', queue) == 1
if waiting then
  queue_prune(now)
  -- This caller's limit is now the id's limit as the store knows it, for the grants below.
  redis.call('HSET', meta, '~l', limit)
  grant(now)
  waiting = redis.call('EXISTS', queue) == 1
end

local reply
if redis.call('ZSCORE', holders, token) then
  -- Already holding: a re-sent acquire (ioredis replays unanswered commands
  -- after a reconnect), or a waiter claiming its grant. Refresh every permit, never count twice.
  holders_add(token, weight, now + lease)
  reply = {1, 0}
elseif waiting and redis.call('ZSCORE', queue, token) then
  redis.call('ZADD', expiry, now + claim, token)
  reply = {2, 0}
elseif not waiting and holders_used() + weight <= limit then
  -- A newcomer never jumps a non-empty queue.
  holders_add(token, weight, now + lease)
  reply = {1, 0}
elseif claim == 0 then
  reply = {0, 0}
elseif maxQueue > 0 and redis.call('ZCARD', queue) >= maxQueue then
  reply = {3, 0}
else
  queue_join(token, ARGV[3], ARGV[2], claim, now)
  redis.call('HSET', meta, '~l', ARGV[2])
  reply = {2, 0}
end
reply[3] = settle(now)
if reply[1] ~= 1 then reply[2] = holders_next(now) end
return reply
