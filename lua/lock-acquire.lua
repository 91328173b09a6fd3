-- Take a lock, or say how long it stays held.
-- KEYS[1] lock key, value = holder's token, expiring with the lease
-- ARGV[1] token  ARGV[2] ttl ms
-- Returns {1, 0} when the token holds the lock, else {0, ms until it expires}.
local key, token, ttl = KEYS[1], ARGV[1], ARGV[2]
-- A re-sent acquire (ioredis replays unanswered commands after a reconnect)
-- finds its own token: refresh instead of failing, or the lock would be a ghost.
if redis.call('GET', key) == token then
  redis.call('PEXPIRE', key, ttl)
  return {1, 0}
end
if redis.call('SET', key, token, 'NX', 'PX', ttl) then return {1, 0} end
return {0, math.max(1, redis.call('PTTL', key))}
