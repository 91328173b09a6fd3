#!lua flags=no-writes,allow-oom
-- Read a semaphore's figures in one round trip, for the id or for one of its tenants; changes
-- nothing (runs on replicas and at maxmemory too).
-- KEYS: as semaphore-acquire.lua.
-- ARGV: [1] a tenant, or nothing for the id.
-- Reply: {permits used by live holders, live holders, live waiters}, and for the id, then the
--   number of tenants holding or waiting.
local holders, queue, expiry = KEYS[1], KEYS[3], KEYS[4]
local only = ARGV[1]
--!include lib/clock.lua
local now, now_us = clock()

-- One member per permit: a holder is its token, and 'x~w[@tenant]' are its further permits.
local function tenant_of(member)
  local at = string.find(member, '@', 1, true)
  if at then return string.sub(member, at + 1) end
  return ''
end
local used, count = 0, 0
local tenants, seen = 0, {}
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf')
for i = 1, #live do
  local tenant = tenant_of(live[i])
  if tenant ~= '' and not seen[tenant] then
    seen[tenant] = true
    tenants = tenants + 1
  end
  if not only or tenant == only then
    used = used + 1
    local head = string.match(live[i], '^([^@]*)')
    if not string.find(head, '~', 1, true) then count = count + 1 end
  end
end
local waiting = 0
local waiters = redis.call('ZRANGEBYSCORE', expiry, '(' .. now, '+inf')
for i = 1, #waiters do
  local tenant = tenant_of(waiters[i])
  if tenant ~= '' and not seen[tenant] then
    seen[tenant] = true
    tenants = tenants + 1
  end
  if not only or tenant == only then waiting = waiting + 1 end
end
if only then return {used, count, waiting} end
return {used, count, waiting, tenants}
