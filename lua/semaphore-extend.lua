-- Push a semaphore lease's expiry to now + lease, if the token still holds a live lease.
-- KEYS[1] holders  KEYS[2] weights (see semaphore-acquire.lua)
-- ARGV[1] token  ARGV[2] lease ms
-- Returns 1 when extended, 0 when the lease is gone or has lapsed.
local holders, weights = KEYS[1], KEYS[2]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Presence is not ownership: a lapsed member stays in the set until an acquire prunes it.
local score = redis.call('ZSCORE', holders, ARGV[1])
if not score or tonumber(score) <= now then return 0 end
redis.call('ZADD', holders, 'XX', now + tonumber(ARGV[2]), ARGV[1])

local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
local ttl = tonumber(last[2]) - now + 1
redis.call('PEXPIRE', holders, ttl)
redis.call('PEXPIRE', weights, ttl)
return 1
