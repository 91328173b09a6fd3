#!lua flags=no-writes,allow-oom
-- Read a lock's state; changes nothing.
-- KEYS[1] lock
-- Returns {1, ms until it expires} while held, {0, 0} when free.
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then return {1, ttl} end
return {0, 0}
