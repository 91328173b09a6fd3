#!lua
-- A shebang without allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- Take permits of a semaphore, or join its waiting room, or say how long until one frees: the full
-- path, for waiting, tenants, and ids with waiters.
-- KEYS[1] holders  KEYS[2] meta  KEYS[3] queue  KEYS[4] expiry  KEYS[5] tenants  KEYS[6] turns
-- (see lib/holders.lua and lib/queue.lua)
-- ARGV[1] token ('<random>' or '<random>@<tenant>')  ARGV[2] limit  ARGV[3] weight  ARGV[4] lease ms
-- ARGV[5] claim ms: the waiter lease; 0 fails fast instead of queueing
-- ARGV[6] max queue length, 0 for none  ARGV[7] tenant cap, 0 for none
-- ARGV[8] max waiters of the tenant, 0 for none
-- Returns {status, ms, marked, fence}: status 1 when the token holds its permits, 2 when it waits
-- in the queue, 0 when refused, 3 when the queue (or its tenant's share of it) is full, 4 when
-- refused because its tenant is at its cap; ms is the time until the nearest lease ends (the
-- tenant's own, for 4); marked, 1 or 0, says whether the id still has waiters (the marker; see
-- lib/settle.lua): the store's hint; fence is the grant's (lib/fence.lua) when status is 1, else
-- the id's typical hold in ms (lib/hold.lua; 0: none).
-- A token already holding (a re-sent acquire, a claim) is granted again: it gets a new fence.
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, limit, weight, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local claim, maxQueue, cap, tenantMax = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
--!include lib/clock.lua

-- The markers (lib/holders.lua): the common case has none but the last fence's ('~f', lib/fence.lua)
-- and the typical hold's ('~h<record>', lib/hold.lua).
local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '(0', 'WITHSCORES')
local nmarks = #marks / 2
local last, record, plain = 0, nil, true
for i = 1, #marks, 2 do
  if marks[i] == '~f' then
    last = -tonumber(marks[i + 1])
  elseif string.sub(marks[i], 1, 2) == '~h' then
    record = marks[i]
  else
    plain = false
  end
end
if cap == 0 and not string.find(token, '@', 1, true) and plain then
--!include lib/take-one.lua
end

--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

marks_seed(marks)
tenants_ready(now)
holders_prune(now)
local limitSet = false
-- The permits held once the grants below are made (nil: not counted yet; queue_join changes none).
local used = nil
if redis.call('EXISTS', queue) == 1 then
  queue_prune(now)
  -- This caller's limit is now the id's limit as the store knows it, for the grants below (written
  -- only when it changes: a busy id's callers mostly pass the same).
  if redis.call('HGET', meta, '~l') ~= ARGV[2] then redis.call('HSET', meta, '~l', ARGV[2]) end
  limitSet = true
  used = select(3, grant(now, nil, nil, { limit = limit }))
end

local tenant = tenant_of(token)
local fitsTenant = cap == 0 or tenant_used(tenant) + weight <= cap
local reply
if redis.call('ZSCORE', holders, token) then
  -- Already holding: a re-sent acquire (ioredis replays unanswered commands after a reconnect),
  -- or a waiter claiming its grant. Refresh every permit, never count twice.
  holders_add(token, weight, string.format('%d', now + lease))
  reply = {1, 0, 0, fence_next()}
elseif redis.call('ZSCORE', expiry, token) then
  redis.call('ZADD', expiry, string.format('%d', now + claim), token)
  reply = {2, 0, 0, 0}
elseif redis.call('EXISTS', queue) == 0 and holders_used() + weight <= limit and fitsTenant then
  -- Nobody waits: the newcomer's turn is now.
  holders_add(token, weight, string.format('%d', now + lease))
  tenants_add(tenant, weight)
  reply = {1, 0, 0, fence_next()}
else
  local from, to = queue_tenant(tenant)
  if claim > 0 and ((maxQueue > 0 and redis.call('ZCARD', queue) >= maxQueue)
      or (tenantMax > 0 and redis.call('ZLEXCOUNT', queue, from, to) >= tenantMax)) then
    reply = {3, 0, 0, 0}
  else
    -- Join (failing fast, only to see whether its turn is now), then grant in turn.
    local ends = now + claim
    if claim == 0 then ends = now + 1 end
    queue_join(token, ARGV[3], ARGV[2], ARGV[7], ends)
    -- Unless set above (only settle deletes meta, at the end).
    if not limitSet then redis.call('HSET', meta, '~l', ARGV[2]) end
    local _, fence = grant(now, token, lease, { limit = limit, used = used })
    if fence then
      reply = {1, 0, 0, fence}
    elseif claim > 0 then
      reply = {2, 0, 0, 0}
    else
      queue_drop(token)
      if fitsTenant then reply = {0, 0, 0, 0} else reply = {4, 0, 0, 0} end
    end
  end
end
reply[3] = settle(now)
if reply[1] ~= 1 then
--!include lib/hold-read.lua
  reply[4] = hold
end
if reply[1] == 4 then
  reply[2] = holders_next(now, tenant)
elseif reply[1] ~= 1 then
  reply[2] = holders_next(now)
end
return reply
