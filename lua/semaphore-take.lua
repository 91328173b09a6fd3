#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The fail-fast acquire of one permit, declaring three keys instead of seven:
-- every declared key and argument costs the client and the server on each
-- call, and this is the call almost every request makes.
-- KEYS[1] holders  KEYS[2] weights  KEYS[3] queue (as semaphore-acquire.lua)
-- ARGV[1] token  ARGV[2] limit  ARGV[3] lease ms
-- Returns {1, 0} when the token holds its permit, {0, ms} when refused (ms
-- until the nearest lease ends), or {-1, 0} when waiters or heavier holders
-- exist: then the caller runs semaphore-acquire.lua, which knows about them.
local holders, weights, queue = KEYS[1], KEYS[2], KEYS[3]
local token, limit, lease, claim = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), 0
if redis.call('EXISTS', weights, queue) > 0 then return {-1, 0} end
--!include lib/clock.lua

--!include lib/take-one.lua
