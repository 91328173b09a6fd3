#!lua flags=no-writes,allow-oom
-- Who holds and who waits, for operators and for the model-based suite; changes nothing.
-- KEYS: as semaphore-acquire.lua.
-- ARGV: none.
-- Reply: {holders, waiters}: each a flat list of token, weight, ms left; live holders by lease end,
--   live waiters in the order they will be served (tenants in turn, each in arrival order).
local holders, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
--!include lib/clock.lua
local now, now_us = clock()

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
-- Tenants in turn order: the tenants parked at their caps (lib/holders.lua) sort after the others in
-- the set, by their tag plus TURN_PARKED; merged back here by their own tag, ties by name in byte order
-- (as the set orders them; Lua's '<' would follow the server's locale).
local TURN_PARKED = 2 ^ 50
local function before(a, b)
  if a.tag ~= b.tag then return a.tag < b.tag end
  for k = 1, math.min(#a.name, #b.name) do
    local x, y = string.byte(a.name, k), string.byte(b.name, k)
    if x ~= y then return x < y end
  end
  return #a.name < #b.name
end
local serving, parked = {}, {}
local turn = redis.call('ZRANGE', turns, 0, -1, 'WITHSCORES')
for i = 1, #turn, 2 do
  local tag = tonumber(turn[i + 1])
  if tag >= TURN_PARKED then
    parked[#parked + 1] = { name = turn[i], tag = tag - TURN_PARKED }
  else
    serving[#serving + 1] = { name = turn[i], tag = tag }
  end
end
local order = {}
local a, b = 1, 1
while serving[a] or parked[b] do
  if not parked[b] or (serving[a] and before(serving[a], parked[b])) then
    order[#order + 1] = serving[a].name
    a = a + 1
  else
    order[#order + 1] = parked[b].name
    b = b + 1
  end
end
local waiting = {}
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
