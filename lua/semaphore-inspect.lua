#!lua flags=no-writes,allow-oom
-- Who holds and who waits, for operators and for the model-based suite; changes nothing.
-- KEYS as semaphore-acquire.lua.
-- Returns {holders, waiters}: each a flat list of token, weight, ms left; live holders by lease
-- end, live waiters in the order they will be served (tenants in turn, each in arrival order).
local holders, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
--!include lib/clock.lua

local held = {}
local at = {}
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  -- 'x~w[@tenant]' is a further permit of 'x[@tenant]'.
  local sign = string.find(live[i], '@', 1, true)
  local base, suffix = live[i], ''
  if sign then base, suffix = string.sub(live[i], 1, sign - 1), string.sub(live[i], sign) end
  local token = string.gsub(base, '~%d+$', '', 1) .. suffix
  if not at[token] then
    held[#held + 1] = token
    held[#held + 1] = 0
    held[#held + 1] = tonumber(live[i + 1]) - now
    at[token] = #held - 1
  end
  held[at[token]] = held[at[token]] + 1
end
local waiting = {}
local order = redis.call('ZRANGE', turns, 0, -1)
for i = 1, #order do
  local line = redis.call('ZRANGEBYLEX', queue, '[' .. order[i] .. '\0', '(' .. order[i] .. '\1')
  for j = 1, #line do
    local token = string.sub(line[j], #order[i] + 18)
    local ends = tonumber(redis.call('ZSCORE', expiry, token))
    if ends and ends > now then
      waiting[#waiting + 1] = token
      waiting[#waiting + 1] = tonumber(string.match(redis.call('HGET', meta, '?' .. token) or '1', '^(%d+)'))
      waiting[#waiting + 1] = ends - now
    end
  end
end
return {held, waiting}
