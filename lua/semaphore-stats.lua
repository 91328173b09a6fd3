#!lua flags=no-writes,allow-oom
-- Read a semaphore's figures in one round trip; changes nothing (runs on replicas and at maxmemory too).
-- KEYS as semaphore-acquire.lua.
-- Returns {permits used by live holders, live holders, live waiters}.
local holders, expiry = KEYS[1], KEYS[4]
--!include lib/clock.lua

-- One member per permit; a holder is its token, the members 'token~w' are its further permits.
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf')
local count = 0
for i = 1, #live do
  if not string.find(live[i], '~', 1, true) then count = count + 1 end
end
return {#live, count, redis.call('ZCOUNT', expiry, '(' .. now, '+inf')}
