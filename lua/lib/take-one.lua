-- The full acquire's common case, before any helper is defined (defining them costs each
-- call more than its commands): one permit, nobody waiting, nobody heavier (no marker).
-- The same step as semaphore-take.lua for one token. Expects locals holders, token, limit,
-- lease, claim and now. Returns, except when full with claim > 0: then the caller goes on
-- to the waiting room.
local card = redis.call('ZCARD', holders)
if card >= limit then
  redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
  card = redis.call('ZCARD', holders)
end
if card < limit or redis.call('ZSCORE', holders, token) then
  redis.call('ZADD', holders, now + lease, token)
  if card == 0 then
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
