#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The fail-fast acquire of one permit, for one caller or for several issued together
-- (the store coalesces them): almost every request makes this call, so it declares one
-- key and defines no helper.
-- KEYS[1] holders (see lib/holders.lua)
-- ARGV[1] limit  ARGV[2] lease ms  ARGV[3..] tokens
-- Returns {-1} when heavier holders or waiters exist (the marker): the caller runs
-- semaphore-acquire.lua, which knows about them. Else, per token, 1 when it holds its
-- permit and 0 when refused, then the ms until the nearest lease ends.
local holders = KEYS[1]
if redis.call('ZSCORE', holders, '~') then return {-1} end
local limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
--!include lib/clock.lua

local card = redis.call('ZCARD', holders)
-- A set that was empty (or is emptied by pruning) is a new key: it gets its first expiry.
local fresh = card == 0
local out = {}
local nearest = 0
local taken = false
for i = 3, #ARGV do
  -- Lapsed leases are reclaimed only when they stand in the way: with room to
  -- spare they cost nothing, and they are at most `limit` entries.
  if card >= limit then
    redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
    card = redis.call('ZCARD', holders)
    fresh = fresh or card == 0
  end
  -- ZADD refreshes a token already holding (a re-sent acquire) in place, so it is never
  -- counted twice; only a full set needs to ask whether it is ours.
  if card < limit or redis.call('ZSCORE', holders, ARGV[i]) then
    card = card + redis.call('ZADD', holders, now + lease, ARGV[i])
    taken = true
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
    local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
    nearest = math.max(1, tonumber(first[2]) - now)
  end
end
-- The key lives until its latest lease ends. GT only ever raises an existing expiry (every
-- script leaves the key with one).
if taken and fresh then
  redis.call('PEXPIREAT', holders, now + lease + 1)
elseif taken then
  redis.call('PEXPIREAT', holders, now + lease + 1, 'GT')
end
out[#out + 1] = nearest
return out
