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
local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '-inf')
local fenced, tenanted = nil, false
for i = 1, #marks do
  if marks[i] == '~' then return {-1} end
  if marks[i] == '~t' then tenanted = true elseif string.sub(marks[i], 1, 2) == '~f' then fenced = marks[i] end
end
if tenants and tenanted and redis.call('EXISTS', tenants) == 0 then return {-1} end
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
-- The last holder gone, the key goes too, unless the clock has not passed the last fence yet: then
-- it stays, holding that alone, until it has (lib/fence.lua).
if fenced and redis.call('ZCARD', holders) == 1 then
  local fence = tonumber(string.sub(fenced, 3))
  if fence >= now_us then
    redis.call('PEXPIREAT', holders, math.floor(fence / 1000) + 1)
  else
    redis.call('DEL', holders)
  end
end
return out
