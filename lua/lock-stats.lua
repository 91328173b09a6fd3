#!lua flags=no-writes,allow-oom
-- Read a lock's state; changes nothing.
-- KEYS: [1] lock.
-- ARGV: none.
-- Reply: {1, ms until it expires} while held, {0, 0} when free.
--!include lib/clock.lua
local now, now_us = clock()
-- A free lock may keep its last fence ('~ <fence>', see lock-acquire.lua): it is not held.
local value = redis.call('GET', KEYS[1])
if not value or string.sub(value, 1, 2) == '~ ' then return {0, 0} end
-- The lease ends one ms after the key's PXAT (see lock-acquire.lua).
local ends = redis.call('PEXPIRETIME', KEYS[1]) + 1
if ends > now then return {1, ends - now} end
return {0, 0}
