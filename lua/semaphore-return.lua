#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- The release of leases on an id nobody waits for, for one caller or several issued together:
-- one key, no helper. The key keeps its expiry: it still vanishes with its latest lease.
-- KEYS[1] holders (see lib/holders.lua)  ARGV: per lease, token and weight (two each)
-- Returns {-1} when waiters exist (the marker): the caller runs semaphore-release.lua, which
-- hands the permits on. Else, per lease, 1 when it was live, 0 when it was gone or had lapsed
-- (its members are removed either way).
local holders = KEYS[1]
if redis.call('ZSCORE', holders, '~') then return {-1} end
--!include lib/clock.lua

local out = {}
for i = 1, #ARGV, 2 do
  local token, weight = ARGV[i], tonumber(ARGV[i + 1])
  local score = redis.call('ZSCORE', holders, token)
  if score then
    local members = { token }
    for w = 2, weight do members[#members + 1] = token .. '~' .. w end
    redis.call('ZREM', holders, unpack(members))
  end
  if score and tonumber(score) > now then out[#out + 1] = 1 else out[#out + 1] = 0 end
end
return out
