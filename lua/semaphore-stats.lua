#!lua flags=no-writes,allow-oom
-- Read a semaphore's figures in one round trip; changes nothing (runs on replicas and at maxmemory too).
-- KEYS[1] holders  KEYS[2] weights  (see lib/holders.lua)  KEYS[3] waiter lease expiries (see lib/queue.lua)
-- Returns {permits used by live holders, live holders, live waiters}.
local holders, weights, expiry = KEYS[1], KEYS[2], KEYS[3]
--!include lib/clock.lua

local live = redis.call('ZCOUNT', holders, '(' .. now, '+inf')
local used = live
local extra = tonumber(redis.call('HGET', weights, '~extra'))
if extra then
  -- Lapsed holders not yet pruned still count in ~extra: take theirs out.
  local lapsed = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
  for i = 1, #lapsed do
    local w = redis.call('HGET', weights, lapsed[i])
    if w then extra = extra - (tonumber(w) - 1) end
  end
  used = used + extra
end
return {used, live, redis.call('ZCOUNT', expiry, '(' .. now, '+inf')}
