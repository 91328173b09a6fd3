#!lua flags=no-writes,allow-oom
-- Who holds and who waits, for operators and for the model-based suite; changes nothing.
-- KEYS as semaphore-acquire.lua.
-- Returns {holders, waiters}: holders as a flat list token, weight, ms left (live ones, by lease
-- end); waiters the same, in ticket order (live ones).
local holders, weights, queue, info, expiry = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--!include lib/clock.lua

local held = {}
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  held[#held + 1] = live[i]
  held[#held + 1] = tonumber(redis.call('HGET', weights, live[i]) or 1)
  held[#held + 1] = tonumber(live[i + 1]) - now
end
local waiting = {}
local order = redis.call('ZRANGE', queue, 0, -1)
for i = 1, #order do
  local ends = tonumber(redis.call('ZSCORE', expiry, order[i]))
  if ends and ends > now then
    local w = string.match(redis.call('HGET', info, order[i]) or '1 1', '^(%d+)')
    waiting[#waiting + 1] = order[i]
    waiting[#waiting + 1] = tonumber(w)
    waiting[#waiting + 1] = ends - now
  end
end
return {held, waiting}
