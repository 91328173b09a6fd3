#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The fail-fast acquire, for one caller or for several issued together (the store coalesces
-- the calls of one turn on one id, in the order they were made): almost every request makes
-- this call, so it declares one key and defines no helper.
-- KEYS[1] holders (see lib/holders.lua)
-- ARGV: per call, token, limit, weight, lease ms (four each)
-- Returns {-1} when waiters exist (the marker): the caller runs semaphore-acquire.lua, which
-- knows about them. Else, per call, 0 when it holds its permits, or the ms until the nearest
-- lease ends when refused.
local holders = KEYS[1]
if redis.call('ZSCORE', holders, '~') then return {-1} end
--!include lib/clock.lua

local card = redis.call('ZCARD', holders)
-- A set that was empty (or is emptied by pruning) is a new key: it gets its first expiry.
local fresh = card == 0
local out = {}
local latest = nil
for i = 1, #ARGV, 4 do
  local token, limit, weight, lease = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  -- Lapsed leases are reclaimed only when they stand in the way: with room to
  -- spare they cost nothing, and they are at most `limit` entries.
  if card + weight > limit then
    redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
    card = redis.call('ZCARD', holders)
    fresh = fresh or card == 0
  end
  -- A token already holding (a re-sent acquire) is refreshed in place, never counted twice.
  if card + weight <= limit or redis.call('ZSCORE', holders, token) then
    local ends = now + lease
    local members = { ends, token }
    for w = 2, weight do
      members[#members + 1] = ends
      members[#members + 1] = token .. '~' .. w
    end
    card = card + redis.call('ZADD', holders, unpack(members))
    if not latest or ends > latest then latest = ends end
    out[#out + 1] = 0
  else
    local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
    out[#out + 1] = math.max(1, tonumber(first[2]) - now)
  end
end
-- The key lives until its latest lease ends. GT only ever raises an existing expiry (every
-- script leaves the key with one).
if latest and fresh then
  redis.call('PEXPIREAT', holders, latest + 1)
elseif latest then
  redis.call('PEXPIREAT', holders, latest + 1, 'GT')
end
return out
