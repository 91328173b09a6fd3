#!lua flags=no-writes,allow-oom
-- Count the live holders of a semaphore (lapsed, unpruned entries are not counted, nor the marker).
-- KEYS[1] holders (see lib/holders.lua)
-- Returns the number of holders whose lease ends after now.
--!include lib/clock.lua
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
