#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- The release of weight-1 leases on an id nobody waits for and nobody heavier holds, for
-- one caller or several issued together: one key, no helper. The keys keep their expiry:
-- they still vanish with their latest lease.
-- KEYS[1] holders (see lib/holders.lua)  ARGV[1..] tokens
-- Returns {-1} when heavier holders or waiters exist (the marker): the caller runs
-- semaphore-release.lua, which hands the permits on. Else, per token, 1 when its lease was
-- live, 0 when it was gone or had lapsed (its entry is removed either way).
local holders = KEYS[1]
if redis.call('ZSCORE', holders, '~') then return {-1} end
--!include lib/clock.lua

local out = {}
for i = 1, #ARGV do
  local score = redis.call('ZSCORE', holders, ARGV[i])
  if score then redis.call('ZREM', holders, ARGV[i]) end
  if score and tonumber(score) > now then out[i] = 1 else out[i] = 0 end
end
return out
