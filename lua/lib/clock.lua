-- The Redis server's clock, in ms: every expiry is computed from it, never from a client's.
-- Expiries are absolute (PXAT, PEXPIREAT) from this one reading, so the model-based suite can
-- swap this file for a clock it sets and replay a case exactly. `now_us`, the same reading in
-- microseconds (a safe integer for centuries), is where fences start (see lib/fence.lua).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local now_us = tonumber(time[1]) * 1000000 + tonumber(time[2])
