#!lua flags=allow-oom
-- Push a lock's expiry to now + ttl, if the token still holds it. allow-oom: under maxmemory with
-- noeviction, a holder must still be able to keep and return what it holds.
-- KEYS: [1] lock.
-- ARGV: [1] token, [2] ttl ms.
-- Reply: 1 when extended, 0 when the lock expired or belongs to someone else.
local value = redis.call('GET', KEYS[1])
-- '<token> <fence>[ <record>]' (see lock-acquire.lua); a free lock's '~ <fence>' is nobody's.
if not value or string.match(value, '^(%S+) %d+') ~= ARGV[1] then return 0 end
--!include lib/clock.lua
local now, now_us = clock()
-- PXAT end - 1: see lock-acquire.lua.
redis.call('PEXPIREAT', KEYS[1], now + tonumber(ARGV[2]) - 1)
return 1
