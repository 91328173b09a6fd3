-- Semaphore holders. Expects locals `holders` (sorted set: token -> lease end in ms, and the
-- marker '~' at score -inf while the fast paths must hand over to the full scripts: see
-- lib/settle.lua) and `meta` (hash: token -> weight of each holder heavier than 1, and
-- '~x' = the sum of (weight - 1) over them, present only while some holder is heavier, so
-- permits used = holders + ~x; it also keeps the waiting room's fields, see lib/queue.lua).
-- Markers sit at -inf and lapsed holders are pruned from '(-inf': the range never takes a marker.

local function holders_extra(by)
  if redis.call('HINCRBY', meta, '~x', by) <= 0 then redis.call('HDEL', meta, '~x') end
end

-- Lapsed leases are reclaimed here rather than by a sweeper.
local function holders_prune(now)
  if redis.call('HEXISTS', meta, '~x') == 0 then
    -- Nobody heavier than 1: dropping the lapsed range is all there is to do.
    redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
    return
  end
  local lapsed = redis.call('ZRANGEBYSCORE', holders, '(-inf', now)
  if #lapsed == 0 then return end
  redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
  local freed = 0
  for i = 1, #lapsed do
    local w = redis.call('HGET', meta, lapsed[i])
    if w then
      freed = freed + tonumber(w) - 1
      redis.call('HDEL', meta, lapsed[i])
    end
  end
  if freed > 0 then holders_extra(-freed) end
end

-- Holders present, lapsed or not (the caller prunes first when it matters), markers aside.
local function holders_count()
  local card = redis.call('ZCARD', holders)
  if card > 0 and redis.call('ZSCORE', holders, '~') then card = card - 1 end
  return card
end

local function holders_used()
  local card = holders_count()
  if card == 0 then return 0 end
  return card + (tonumber(redis.call('HGET', meta, '~x')) or 0)
end

local function holders_add(token, weight, ends)
  redis.call('ZADD', holders, ends, token)
  if weight > 1 then
    redis.call('HSET', meta, token, weight)
    holders_extra(weight - 1)
  end
end

-- Returns the lease end the token had, or false.
local function holders_remove(token)
  local score = redis.call('ZSCORE', holders, token)
  if not score then return false end
  redis.call('ZREM', holders, token)
  local w = redis.call('HGET', meta, token)
  if w then
    redis.call('HDEL', meta, token)
    holders_extra(1 - tonumber(w))
  end
  return tonumber(score)
end

-- Ms until the nearest lease ends: when a permit frees at the latest.
local function holders_next(now)
  local first = redis.call('ZRANGEBYSCORE', holders, '(-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return 1
end

-- The latest lease end among holders, or nil.
local function holders_latest()
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if last[1] and last[1] ~= '~' then return tonumber(last[2]) end
  return nil
end
