-- The full acquire's common case, before any helper is defined (defining them costs each call more
-- than its commands): nobody waiting and no tenant. The same step as semaphore-take.lua for one
-- token. Expects locals holders, token, limit, weight, lease, claim and now. Returns, except when
-- full with claim > 0: then the caller goes on to the waiting room.
local card = redis.call('ZCARD', holders)
if card + weight > limit then
  redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
  card = redis.call('ZCARD', holders)
end
local fresh = card == 0
if card + weight <= limit or redis.call('ZSCORE', holders, token) then
  local members = { now + lease, token }
  for i = 2, weight do
    members[#members + 1] = now + lease
    members[#members + 1] = token .. '~' .. i
  end
  redis.call('ZADD', holders, unpack(members))
  if fresh then
    redis.call('PEXPIREAT', holders, now + lease + 1)
  else
    redis.call('PEXPIREAT', holders, now + lease + 1, 'GT')
  end
  return {1, 0, 0}
end
if claim == 0 then
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(first[2]) - now), 0}
end
