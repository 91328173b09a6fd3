#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The fail-fast acquire, for one caller or for several issued together (the store coalesces the
-- calls of one turn on one id, in the order they were made): almost every request makes this call,
-- so it declares the holders set (and the tenant index when a caller has a tenant) and defines no
-- helper.
-- KEYS[1] holders  KEYS[2] tenants, when a caller has one  (see lib/holders.lua)
-- ARGV: per call, token, limit, weight, lease ms, tenant cap (0: none) (five each)
-- Returns {-1} when waiters exist (the marker) or the tenant index must be rebuilt: the caller runs
-- semaphore-acquire.lua; {-2} when tenants hold and their index was not declared: the caller
-- declares it and calls again. Else, per call, 0 when it holds its permits, or when refused the ms
-- until the nearest lease ends (negative: refused because its tenant is at its cap, the ms until
-- the tenant's own nearest lease ends).
local holders, tenants = KEYS[1], KEYS[2]
if redis.call('ZSCORE', holders, '~') then return {-1} end
if redis.call('ZSCORE', holders, '~t') then
  if not tenants then return {-2} end
  if redis.call('EXISTS', tenants) == 0 then return {-1} end
end
--!include lib/clock.lua

local card = redis.call('ZCARD', holders) - redis.call('ZCOUNT', holders, '-inf', '-inf')
-- A set that was empty (or is emptied by pruning) is a new key: it gets its first expiry.
local fresh = redis.call('EXISTS', holders) == 0
local out = {}
local latest = nil
for i = 1, #ARGV, 5 do
  local token, limit, weight, lease, cap = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local at = string.find(token, '@', 1, true)
  local tenant = at and string.sub(token, at + 1) or ''
  local used = 0
  if tenant ~= '' then used = tonumber(redis.call('ZSCORE', tenants, tenant)) or 0 end
  -- Lapsed leases are reclaimed only when they stand in the way: with room to spare they cost nothing.
  if card + weight > limit or (cap > 0 and used + weight > cap) then
    if redis.call('ZSCORE', holders, '~t') then
      local lapsed = redis.call('ZRANGEBYSCORE', holders, '(-inf', now)
      for j = 1, #lapsed do
        local t = string.find(lapsed[j], '@', 1, true)
        if t then
          if tonumber(redis.call('ZINCRBY', tenants, -1, string.sub(lapsed[j], t + 1))) <= 0 then
            redis.call('ZREM', tenants, string.sub(lapsed[j], t + 1))
          end
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
    card = redis.call('ZCARD', holders) - redis.call('ZCOUNT', holders, '-inf', '-inf')
    fresh = fresh or redis.call('EXISTS', holders) == 0
    if tenant ~= '' then used = tonumber(redis.call('ZSCORE', tenants, tenant)) or 0 end
  end
  -- A token already holding (a re-sent acquire) is refreshed in place, never counted twice.
  local holding = redis.call('ZSCORE', holders, token)
  if holding or (card + weight <= limit and (cap == 0 or used + weight <= cap)) then
    local ends = now + lease
    local base, suffix = token, ''
    if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
    local members = { ends, token }
    for w = 2, weight do
      members[#members + 1] = ends
      members[#members + 1] = base .. '~' .. w .. suffix
    end
    redis.call('ZADD', holders, unpack(members))
    if not holding then
      card = card + weight
      if tenant ~= '' then
        redis.call('ZINCRBY', tenants, weight, tenant)
        redis.call('ZADD', holders, '-inf', '~t')
        redis.call('PEXPIREAT', tenants, ends + 1, 'GT')
        if redis.call('PEXPIRETIME', tenants) < 0 then redis.call('PEXPIREAT', tenants, ends + 1) end
      end
    end
    if not latest or ends > latest then latest = ends end
    out[#out + 1] = 0
  elseif cap > 0 and used + weight > cap then
    -- The tenant's own figure: when one of its leases ends.
    local nearest = 1
    local live = redis.call('ZRANGEBYSCORE', holders, '(-inf', '+inf', 'WITHSCORES')
    for j = 1, #live, 2 do
      local t = string.find(live[j], '@', 1, true)
      if t and string.sub(live[j], t + 1) == tenant then
        nearest = math.max(1, tonumber(live[j + 1]) - now)
        break
      end
    end
    out[#out + 1] = -nearest
  else
    local first = redis.call('ZRANGEBYSCORE', holders, '(-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
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
