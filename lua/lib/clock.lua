-- The Redis server's clock, in ms: every expiry is computed from it, never from a client's.
-- Expiries are absolute (PXAT, PEXPIREAT) from this one reading, so the model-based suite can
-- swap this file for a clock it sets and replay a case exactly. `now_us`, the same reading in
-- microseconds (a safe integer for centuries), is where fences start (see lib/fence.lua).
-- Read by arithmetic rather than tonumber, which parses a string twice (Lua 5.1 checks, then
-- converts); every script runs this.
local time = redis.call('TIME')
local secs, micros = time[1] + 0, time[2] + 0
local now = secs * 1000 + (micros - micros % 1000) / 1000
local now_us = secs * 1000000 + micros
