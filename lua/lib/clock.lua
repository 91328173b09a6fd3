-- The Redis server's clock, in ms: every expiry is computed from it, never from a client's.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
