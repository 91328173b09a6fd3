#!lua flags=allow-oom
-- allow-oom: under maxmemory with noeviction, a holder must still be able to keep and return what it holds.
-- Push leases' ends to now + lease, for each token that still holds a live lease: one
-- holder's renewal, or a process's renewals of many leases on the id at once.
-- KEYS[1] holders  KEYS[2] meta, only when a lease is heavier than 1 (see lib/holders.lua)
-- ARGV[1] lease ms  ARGV[2..] tokens
-- Returns, per token, 1 when extended, 0 when the lease is gone or has lapsed.
local holders, meta = KEYS[1], KEYS[2]
--!include lib/clock.lua

local ends = now + tonumber(ARGV[1])
local out = {}
local extended = false
for i = 2, #ARGV do
  -- Presence is not ownership: a lapsed member stays in the set until something prunes it.
  local score = redis.call('ZSCORE', holders, ARGV[i])
  if score and tonumber(score) > now then
    redis.call('ZADD', holders, 'XX', ends, ARGV[i])
    extended = true
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if extended then
  -- GT: the keys keep covering every other lease (both always carry an expiry while they exist).
  redis.call('PEXPIREAT', holders, ends + 1, 'GT')
  if meta then redis.call('PEXPIREAT', meta, ends + 1, 'GT') end
end
return out
