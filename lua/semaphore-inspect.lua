#!lua flags=no-writes,allow-oom
-- Who holds and who waits, for operators and for the model-based suite; changes nothing.
-- KEYS as semaphore-acquire.lua.
-- Returns {holders, waiters}: each a flat list of token, weight, ms left; live holders by
-- lease end, live waiters in ticket order.
local holders, meta, queue, expiry = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--!include lib/clock.lua

local held = {}
local at = {}
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local token = string.match(live[i], '^([^~]+)')
  if not at[token] then
    held[#held + 1] = token
    held[#held + 1] = 0
    held[#held + 1] = tonumber(live[i + 1]) - now
    at[token] = #held - 1
  end
  held[at[token]] = held[at[token]] + 1
end
local waiting = {}
local order = redis.call('ZRANGE', queue, 0, -1)
for i = 1, #order do
  local ends = tonumber(redis.call('ZSCORE', expiry, order[i]))
  if ends and ends > now then
    waiting[#waiting + 1] = order[i]
    waiting[#waiting + 1] = tonumber(string.match(redis.call('HGET', meta, '?' .. order[i]) or '1', '^(%d+)'))
    waiting[#waiting + 1] = ends - now
  end
end
return {held, waiting}
