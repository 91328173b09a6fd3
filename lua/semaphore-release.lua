-- Return a semaphore lease's permits.
-- KEYS[1] holders  KEYS[2] weights (see semaphore-acquire.lua)
-- ARGV[1] token
-- Returns 1 when the lease was live, 0 when it was gone or had lapsed (its
-- entry, if still present, is removed either way).
local holders, weights, token = KEYS[1], KEYS[2], ARGV[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local score = redis.call('ZSCORE', holders, token)
if not score then return 0 end
redis.call('ZREM', holders, token)
local w = redis.call('HGET', weights, token)
if w then
  redis.call('HDEL', weights, token)
  redis.call('HINCRBY', weights, '~extra', 1 - tonumber(w))
end
if redis.call('EXISTS', holders) == 0 then redis.call('DEL', weights) end
if tonumber(score) <= now then return 0 end
return 1
