#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Push a semaphore lease's end to now + lease, if the token still holds a live lease.
-- KEYS[1] holders  KEYS[2] weights (see lib/holders.lua)
-- ARGV[1] token  ARGV[2] lease ms
-- Returns 1 when extended, 0 when the lease is gone or has lapsed.
local holders, weights = KEYS[1], KEYS[2]
--!include lib/clock.lua

-- Presence is not ownership: a lapsed member stays in the set until an acquire prunes it.
local score = redis.call('ZSCORE', holders, ARGV[1])
if not score or tonumber(score) <= now then return 0 end
local ends = now + tonumber(ARGV[2])
redis.call('ZADD', holders, 'XX', ends, ARGV[1])
-- GT: the keys keep covering every other lease (both always have an expiry; weights may be absent).
redis.call('PEXPIREAT', holders, ends + 1, 'GT')
redis.call('PEXPIREAT', weights, ends + 1, 'GT')
return 1
