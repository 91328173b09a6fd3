#!lua flags=no-writes,allow-oom
-- Read a semaphore's figures in one round trip; changes nothing (runs on replicas and at maxmemory too).
-- KEYS as semaphore-acquire.lua.
-- Returns {permits used by live holders, live holders, live waiters}.
local holders, meta, expiry = KEYS[1], KEYS[2], KEYS[4]
--!include lib/clock.lua

local live = redis.call('ZCOUNT', holders, '(' .. now, '+inf')
local used = live
local extra = tonumber(redis.call('HGET', meta, '~x'))
if extra then
  -- Lapsed holders not yet pruned still count in ~x: take theirs out.
  local lapsed = redis.call('ZRANGEBYSCORE', holders, '(-inf', now)
  for i = 1, #lapsed do
    local w = redis.call('HGET', meta, lapsed[i])
    if w then extra = extra - (tonumber(w) - 1) end
  end
  used = used + extra
end
return {used, live, redis.call('ZCOUNT', expiry, '(' .. now, '+inf')}
