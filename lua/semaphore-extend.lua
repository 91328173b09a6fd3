#!lua flags=allow-oom
-- Push leases' ends to now + lease, for each that is still live: one holder's renewal, or a
-- process's renewals of many leases on the id at once. allow-oom: under maxmemory with noeviction,
-- a holder must still be able to keep and return what it holds.
-- KEYS: [1] holders (see lib/holders.lua).
-- ARGV: per lease, token, lease ms and weight (three each; weight 0: not known, counted here).
-- Reply: per lease, 1 when extended, 0 when it is gone or has lapsed.
local holders = KEYS[1]
--!include lib/clock.lua
local now, now_us = clock()

local out = {}
local latest = nil
for i = 1, #ARGV, 3 do
  local token, lease, weight = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  -- Presence is not ownership: a lapsed member stays in the set until something prunes it.
  local score = redis.call('ZSCORE', holders, token)
  if score and tonumber(score) > now then
    -- Its further permits are '<random>~w[@tenant]' (see lib/holders.lua).
    local at = string.find(token, '@', 1, true)
    local base, suffix = token, ''
    if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
    if weight == 0 then
      weight = 1
      while redis.call('ZSCORE', holders, base .. '~' .. (weight + 1) .. suffix) do weight = weight + 1 end
    end
    local ends = now + lease
    local members = { ends, token }
    for w = 2, weight do
      members[#members + 1] = ends
      members[#members + 1] = base .. '~' .. w .. suffix
    end
    -- In slices: Lua's unpack stops at 8,000 values (a weight past 4,000).
    for from = 1, #members, 4000 do
      redis.call('ZADD', holders, 'XX', unpack(members, from, math.min(from + 3999, #members)))
    end
    if not latest or ends > latest then latest = ends end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
-- GT: the key keeps covering every other lease (it always carries an expiry while it exists).
if latest then redis.call('PEXPIREAT', holders, latest + 1, 'GT') end
return out
