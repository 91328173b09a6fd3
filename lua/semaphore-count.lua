-- Count the live holders of a semaphore (lapsed, unpruned entries are not counted).
-- KEYS[1] holders (see semaphore-acquire.lua)
-- Returns the number of holders whose lease ends after now.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
