-- Take permits of a semaphore, or say how long until the nearest lease ends.
-- KEYS[1] holders: sorted set, member = lease token, score = lease expiry (ms, server clock)
-- KEYS[2] weights: hash, token -> weight for holders heavier than 1, and
--         "~extra" = sum of (weight - 1) over them, so permits used = ZCARD + extra
-- ARGV[1] token  ARGV[2] limit  ARGV[3] weight  ARGV[4] lease ms
-- Returns {1, 0} when the token holds its permits, else {0, ms until the nearest expiry}.
local holders, weights = KEYS[1], KEYS[2]
local token, limit, weight, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local weighted = redis.call('EXISTS', weights) == 1

-- Lapsed leases are reclaimed here rather than by a sweeper.
local lapsed = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  if weighted then
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
end

local expires = now + lease
-- A re-sent acquire (ioredis replays unanswered commands after a reconnect)
-- must refresh the lease it already took, not take a second one.
if not redis.call('ZSCORE', holders, token) then
  local used = redis.call('ZCARD', holders)
  if weighted then used = used + (tonumber(redis.call('HGET', weights, '~extra')) or 0) end
  if used + weight > limit then
    local nearest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
    if nearest[2] then return {0, math.max(1, tonumber(nearest[2]) - now)} end
    return {0, 1}
  end
  if weight > 1 then
    redis.call('HSET', weights, token, weight)
    redis.call('HINCRBY', weights, '~extra', weight - 1)
    weighted = true
  end
end
redis.call('ZADD', holders, expires, token)

-- Idle keys vanish with their last lease: no sweeper, no garbage.
local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
local ttl = tonumber(last[2]) - now + 1
redis.call('PEXPIRE', holders, ttl)
if weighted then redis.call('PEXPIRE', weights, ttl) end
return {1, 0}
