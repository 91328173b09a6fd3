#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- The release of leases on an id nobody waits for, for one caller or several issued together:
-- no helper. The keys keep their expiry: they still vanish with their latest lease.
-- KEYS[1] holders  KEYS[2] tenants, when a lease has one (see lib/holders.lua)
-- ARGV: per lease, token and weight (two each)
-- Returns {-1} when waiters exist (the marker), or when the tenant index must be rebuilt: the caller
-- runs semaphore-release.lua. Else, per lease, 1 when it was live, 0 when it was gone or had lapsed
-- (its members are removed either way).
local holders, tenants = KEYS[1], KEYS[2]
if redis.call('ZSCORE', holders, '~') then return {-1} end
if tenants and redis.call('ZSCORE', holders, '~t') and redis.call('EXISTS', tenants) == 0 then return {-1} end
--!include lib/clock.lua

local out = {}
for i = 1, #ARGV, 2 do
  local token, weight = ARGV[i], tonumber(ARGV[i + 1])
  local score = redis.call('ZSCORE', holders, token)
  if score then
    local at = string.find(token, '@', 1, true)
    local base, suffix = token, ''
    if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
    local members = { token }
    for w = 2, weight do members[#members + 1] = base .. '~' .. w .. suffix end
    redis.call('ZREM', holders, unpack(members))
    if at and tenants then
      local tenant = string.sub(token, at + 1)
      if tonumber(redis.call('ZINCRBY', tenants, -weight, tenant)) <= 0 then redis.call('ZREM', tenants, tenant) end
    end
  end
  if score and tonumber(score) > now then out[#out + 1] = 1 else out[#out + 1] = 0 end
end
if tenants and redis.call('EXISTS', tenants) == 0 then redis.call('ZREM', holders, '~t') end
return out
