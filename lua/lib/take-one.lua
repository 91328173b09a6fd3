-- The full acquire's common case, before any helper is defined (defining them costs each call more
-- than its commands): nobody waiting and no tenant. The same step as semaphore-take.lua for one
-- token. Expects locals holders, token, limit, weight, lease, claim, now, now_us, `nmarks`, the
-- number of markers in the holders set (none but the last fence's and the typical hold's), `last`,
-- the last fence (lib/fence.lua; 0 when none is kept), and `record`, the typical hold's (lib/hold.lua).
-- Returns, except when full with claim > 0: then the caller goes on to the waiting room.
local card = redis.call('ZCARD', holders) - nmarks
if card + weight > limit then
  redis.call('ZREMRANGEBYSCORE', holders, '0', now)
  card = redis.call('ZCARD', holders) - nmarks
end
-- No holder and no marker: the key is new (or pruning emptied it away) and gets its first expiry.
local fresh = card == 0 and nmarks == 0
if card + weight <= limit or redis.call('ZSCORE', holders, token) then
  local fence = math.max(last + 1, now_us)
  local ends = now + lease
  -- The fence marker's score moves on in the same ZADD.
  local members = { string.format('%.0f', -fence), '~f', ends, token }
  for i = 2, weight do
    members[#members + 1] = ends
    members[#members + 1] = token .. '~' .. i
  end
  -- In slices: Lua's unpack stops at 8,000 values (a weight past 4,000).
  for from = 1, #members, 4000 do redis.call('ZADD', holders, unpack(members, from, math.min(from + 3999, #members))) end
  local at = math.max(ends + 1, math.floor(fence / 1000) + 1)
  if fresh then
    redis.call('PEXPIREAT', holders, at)
  else
    redis.call('PEXPIREAT', holders, at, 'GT')
  end
  return {1, 0, 0, fence}
end
if claim == 0 then
  local first = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
--!include lib/hold-read.lua
  return {0, math.max(1, tonumber(first[2]) - now), 0, hold}
end
