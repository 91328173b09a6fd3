-- The common case of an acquire: one permit, nobody waiting, nobody heavier
-- than 1 (the caller checked both). Reclaim lapsed leases, take, done. Expects
-- locals holders, token, limit, lease, claim (0: fail fast) and now. Returns,
-- except when full with claim > 0: then the caller goes on to the waiting room.
local card = redis.call('ZCARD', holders)
-- Lapsed leases are reclaimed only when they stand in the way: with room to
-- spare they cost nothing, and they are at most `limit` entries.
if card >= limit then
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  card = redis.call('ZCARD', holders)
end
-- ZADD refreshes a token already holding (a re-sent acquire) in place, so it
-- is never counted twice; only a full set needs to ask whether it is ours.
if card < limit or redis.call('ZSCORE', holders, token) then
  redis.call('ZADD', holders, now + lease, token)
  -- The key lives until its latest lease ends. A new key gets its first expiry;
  -- GT only ever raises an existing one (every script leaves the key with one).
  if card == 0 then
    redis.call('PEXPIREAT', holders, now + lease + 1)
  else
    redis.call('PEXPIREAT', holders, now + lease + 1, 'GT')
  end
  return {1, 0}
end
if claim == 0 then
  local nearest = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  return {0, math.max(1, tonumber(nearest[2]) - now)}
end
