-- The waiting room, shared by semaphores and locks. Expects locals `queue` (sorted set:
-- token -> ticket, in arrival order), `expiry` (sorted set: token -> waiter lease end, ms) and
-- `info` (a semaphore's meta hash: '?'..token -> "weight limit" of each waiter, as the caller
-- passed them (strings: a limit of 2^53 must not turn into "9.007199254741e+15"); nil for locks).
-- A waiter's own short lease is refreshed by its process; a waiter whose process died lapses
-- and stops blocking the ones behind it.

local function queue_drop(token)
  redis.call('ZREM', queue, token)
  redis.call('ZREM', expiry, token)
  if info then redis.call('HDEL', info, '?' .. token) end
end

local function queue_prune(now)
  local lapsed = redis.call('ZRANGEBYSCORE', expiry, '-inf', now)
  for i = 1, #lapsed do queue_drop(lapsed[i]) end
end

-- Weight and own limit of a waiter. Without its entry (a lock, or an evicted meta hash), 1 and 1:
-- the most cautious reading, granted only when nothing is held.
local function queue_info(token)
  local w, l = string.match(info and redis.call('HGET', info, '?' .. token) or '', '^(%d+) (%d+)$')
  return tonumber(w) or 1, tonumber(l) or 1
end

local function queue_head()
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- The server assigns the order: a ticket after the last one queued. `weight` and `limit` are
-- the caller's arguments, kept as they came.
local function queue_join(token, weight, limit, claim, now)
  local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
  redis.call('ZADD', queue, (tonumber(last[2]) or 0) + 1, token)
  redis.call('ZADD', expiry, now + claim, token)
  if info then redis.call('HSET', info, '?' .. token, weight .. ' ' .. limit) end
end

-- Keeps the waiter leases of these tokens (those still queued) for `claim` ms more.
local function queue_refresh(tokens, first, claim, now)
  for i = first, #tokens do redis.call('ZADD', expiry, 'XX', now + claim, tokens[i]) end
end

-- The latest waiter lease end, or nil.
local function queue_latest()
  local last = redis.call('ZRANGE', expiry, -1, -1, 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end
