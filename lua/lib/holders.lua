-- Semaphore holders. Expects locals: holders (sorted set token -> lease end, ms),
-- weights (hash token -> weight for holders heavier than 1, and "~extra" = sum of
-- (weight - 1) over them, so permits used = ZCARD + extra). A granted waiter is a
-- holder whose lease end is its reservation.

-- Lapsed leases are reclaimed here rather than by a sweeper.
local function holders_prune(now)
  if redis.call('EXISTS', weights) == 0 then
    -- Nobody heavier than 1: dropping the lapsed range is all there is to do.
    redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
    return
  end
  local lapsed = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
  if #lapsed == 0 then return end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  local freed = 0
  for i = 1, #lapsed do
    local w = redis.call('HGET', weights, lapsed[i])
    if w then
      freed = freed + tonumber(w) - 1
      redis.call('HDEL', weights, lapsed[i])
    end
  end
  if freed > 0 then redis.call('HINCRBY', weights, '~extra', -freed) end
end

local function holders_used()
  local card = redis.call('ZCARD', holders)
  -- Weights never outlive their holders (holders_expire keeps their TTLs equal); an empty set holds nothing.
  if card == 0 then return 0 end
  return card + (tonumber(redis.call('HGET', weights, '~extra')) or 0)
end

local function holders_add(token, weight, expires)
  redis.call('ZADD', holders, expires, token)
  if weight > 1 then
    redis.call('HSET', weights, token, weight)
    redis.call('HINCRBY', weights, '~extra', weight - 1)
  end
end

-- Returns the lease end the token had, or false.
local function holders_remove(token)
  local score = redis.call('ZSCORE', holders, token)
  if not score then return false end
  redis.call('ZREM', holders, token)
  local w = redis.call('HGET', weights, token)
  if w then
    redis.call('HDEL', weights, token)
    redis.call('HINCRBY', weights, '~extra', 1 - tonumber(w))
  end
  return tonumber(score)
end

-- Both keys live exactly until the latest lease ends, and vanish with it: no sweeper, no
-- garbage, and the weights can never lapse before a holder they count. Every script that
-- changes holders by its full path ends here.
local function holders_expire(now)
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if not last[2] or tonumber(last[2]) <= now then
    redis.call('DEL', holders, weights)
    return
  end
  local at = tonumber(last[2]) + 1
  redis.call('PEXPIREAT', holders, at)
  redis.call('PEXPIREAT', weights, at)
end

-- Ms until the nearest lease ends: when a permit frees at the latest.
local function holders_next(now)
  local nearest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  if nearest[2] then return math.max(1, tonumber(nearest[2]) - now) end
  return 1
end
