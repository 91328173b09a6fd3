-- The waiting room, shared by semaphores and locks. Expects locals: queue (sorted
-- set token -> ticket from INCR on tickets), info (hash token -> "weight lease
-- claim"), expiry (sorted set token -> waiter lease end), tickets (counter).
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

-- weight, lease ms, claim window ms of a waiter.
local function queue_info(token)
  local w, l, c = string.match(redis.call('HGET', info, token) or '1 1 1', '^(%d+) (%d+) (%d+)$')
  return tonumber(w), tonumber(l), tonumber(c)
end

local function queue_head()
  return redis.call('ZRANGE', queue, 0, 0)[1]
end

-- The server assigns the order: a ticket from one counter.
local function queue_join(token, weight, lease, claim, now)
  redis.call('ZADD', queue, redis.call('INCR', tickets), token)
  redis.call('HSET', info, token, weight .. ' ' .. lease .. ' ' .. claim)
  redis.call('ZADD', expiry, now + claim, token)
end

-- Idle waiting-room keys (and `extra`, if given) vanish with the last waiter lease.
local function queue_expire(now, extra)
  local keys = { queue, info, expiry, tickets }
  if extra then keys[#keys + 1] = extra end
  local last = redis.call('ZRANGE', expiry, -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', unpack(keys))
    return
  end
  local ttl = tonumber(last[2]) - now + 1
  for i = 1, #keys do redis.call('PEXPIRE', keys[i], ttl) end
end
