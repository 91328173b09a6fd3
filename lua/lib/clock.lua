-- The Redis server's clock, in ms: every expiry is computed from it, never from a client's.
-- Expiries are absolute (PXAT, PEXPIREAT) from this one reading, so the model-based suite can
-- swap this file for a clock it sets and replay a case exactly. The second value, the same reading
-- in microseconds (a safe integer for centuries), is where fences start (see lib/fence.lua).
-- Read by arithmetic rather than tonumber, which parses a string twice (Lua 5.1 checks, then
-- converts); every script calls this once, as `local now, now_us = clock()`.
local function clock()
  local time = redis.call('TIME')
  local secs, micros = time[1] + 0, time[2] + 0
  return secs * 1000 + (micros - micros % 1000) / 1000, secs * 1000000 + micros
end
