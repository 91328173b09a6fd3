-- Semaphore holders. Expects locals: holders (sorted set token -> lease expiry),
-- weights (hash token -> weight for holders heavier than 1, and "~extra" = sum of
-- (weight - 1) over them, so permits used = ZCARD + extra).

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
  return redis.call('ZCARD', holders) + (tonumber(redis.call('HGET', weights, '~extra')) or 0)
end

local function holders_add(token, weight, expires)
  redis.call('ZADD', holders, expires, token)
  if weight > 1 then
    redis.call('HSET', weights, token, weight)
    redis.call('HINCRBY', weights, '~extra', weight - 1)
  end
end

-- Returns the score the token had, or false.
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

-- Idle keys vanish with their last lease: no sweeper, no garbage.
local function holders_expire(now)
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if not last[2] then
    redis.call('DEL', weights)
    return
  end
  local ttl = tonumber(last[2]) - now + 1
  redis.call('PEXPIRE', holders, ttl)
  redis.call('PEXPIRE', weights, ttl)
end

-- Ms until the nearest lease ends: when a permit frees at the latest.
local function holders_next(now)
  local nearest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  if nearest[2] then return math.max(1, tonumber(nearest[2]) - now) end
  return 1
end
