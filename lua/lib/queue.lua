-- The waiting room, shared by semaphores and locks. Expects locals: queue (sorted
-- set token -> ticket from INCR on tickets), info (hash token -> "weight limit"),
-- expiry (sorted set token -> waiter lease end, ms), tickets (counter), limits (the
-- id's limit as the store knows it: the limit of the latest acquire that met or
-- joined the queue; semaphores only, nil for locks).
-- A waiter's own short lease is refreshed by its process; a waiter whose
-- process died lapses and stops blocking the ones behind it.

local function queue_drop(token)
  redis.call('ZREM', queue, token)
  redis.call('HDEL', info, token)
  redis.call('ZREM', expiry, token)
end

local function queue_prune(now)
  local lapsed = redis.call('ZRANGEBYSCORE', expiry, '-inf', now)
  for i = 1, #lapsed do queue_drop(lapsed[i]) end
end

-- Weight and own limit of a waiter.
local function queue_info(token)
  local w, l = string.match(redis.call('HGET', info, token) or '1 1', '^(%d+) (%d+)$')
  return tonumber(w), tonumber(l)
end

local function queue_head()
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- The server assigns the order: a ticket from one counter.
local function queue_join(token, weight, limit, claim, now)
  redis.call('ZADD', queue, redis.call('INCR', tickets), token)
  redis.call('HSET', info, token, weight .. ' ' .. limit)
  redis.call('ZADD', expiry, now + claim, token)
end

-- Keeps the waiter leases of these tokens (those still queued) for `claim` ms more.
local function queue_refresh(tokens, first, claim, now)
  for i = first, #tokens do redis.call('ZADD', expiry, 'XX', now + claim, tokens[i]) end
end

-- Every waiting-room key lives exactly until the last waiter lease ends, and vanishes
-- with it. Every script that changes the queue ends here.
local function queue_expire(now)
  local keys = { queue, info, expiry, tickets }
  if limits then keys[#keys + 1] = limits end
  local last = redis.call('ZRANGE', expiry, -1, -1, 'WITHSCORES')
  if not last[2] or tonumber(last[2]) <= now then
    redis.call('DEL', unpack(keys))
    return
  end
  local at = tonumber(last[2]) + 1
  for i = 1, #keys do redis.call('PEXPIREAT', keys[i], at) end
end
