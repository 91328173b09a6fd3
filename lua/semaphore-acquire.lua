#!lua
-- Take permits of a semaphore, or join its waiting room, or say how long until one frees: the full
-- path (semaphore-acquire-fast.lua is the fast one), for waiting, tenants, and ids with waiters;
-- for one caller, or several issued together on one id (the joins of one turn on a contended id:
-- the releases of one reply end together, and their callers come back at once). The shebang has
-- no allow-oom: at maxmemory with noeviction, taking a new lease is refused up front (OOM).
-- The outcome of several is that of one call per caller, in ARGV's order, at one server time: each
-- joins (or is granted) and admits whom it makes room for before the next one steps in. What runs
-- once is what another call at the same time would redo to no effect: the clock, the marker read,
-- pruning holders (nothing lapses between them at one time), the tenant index's check and settle
-- (which only writes markers and expiries from the state it finds).
-- A token already holding (a re-sent acquire, a claim) is granted again: it gets a new fence.
-- KEYS: [1] holders, [2] meta, [3] queue, [4] expiry, [5] tenants, [6] turns (see lib/holders.lua
--   and lib/queue.lua).
-- ARGV: per caller (eight each): token ('<random>' or '<random>@<tenant>'), limit, weight, lease
--   ms, claim ms (the waiter lease; 0 fails fast instead of queueing), max queue length (0 for
--   none), tenant cap (0 for none), max waiters of the tenant (0 for none).
-- Reply: for one caller, {status, ms, marked, fence}: status 1 when the token holds its permits,
--   2 when it waits in the queue, 0 when refused, 3 when the queue (or its tenant's share of it) is
--   full, 4 when refused because its tenant is at its cap; ms is the time until the nearest lease
--   ends (the tenant's own, for 4); marked, 1 or 0, says whether the id still has waiters (the
--   marker; see lib/settle.lua): the store's hint; fence is the grant's (lib/fence.lua) when status
--   is 1, else the id's typical hold in ms (lib/hold.lua; 0: none). For several: {status, ms,
--   fence-or-hold} per caller (or {'ERR <message>', 0, 0} when that caller's step failed: the
--   others still go, as their own calls would), then marked.
local holders, meta, queue, expiry, tenants, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, limit, weight, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local claim, cap = tonumber(ARGV[5]), tonumber(ARGV[7])
--!include lib/clock.lua
local now, now_us = clock()

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
-- The common case, before the full path's helpers are defined (defining them costs each call more
-- than its commands): one caller, nobody waiting and no tenant; the same step as
-- semaphore-acquire-fast.lua for one token. It answers, except when full with claim > 0: then the
-- caller goes on to the waiting room.
if #ARGV == 8 and cap == 0 and not string.find(token, '@', 1, true) and plain then
  local card = redis.call('ZCARD', holders) - nmarks
  if card + weight > limit then
    redis.call('ZREMRANGEBYSCORE', holders, '0', now)
    card = redis.call('ZCARD', holders) - nmarks
  end
  -- No holder and no marker: the key is new (or pruning emptied it away) and gets its first expiry.
  local fresh = card == 0 and nmarks == 0
  if card + weight <= limit or redis.call('ZSCORE', holders, token) then
    local fence = math.max(last + 1, now_us)
    local ends = now + lease
    -- The fence marker's score moves on in the same ZADD.
    local members = { string.format('%.0f', -fence), '~f', ends, token }
    for i = 2, weight do
      members[#members + 1] = ends
      members[#members + 1] = token .. '~' .. i
    end
    -- In slices: Lua's unpack stops at 8,000 values (a weight past 4,000).
    for from = 1, #members, 4000 do redis.call('ZADD', holders, unpack(members, from, math.min(from + 3999, #members))) end
    local at = math.max(ends + 1, math.floor(fence / 1000) + 1)
    if fresh then
      redis.call('PEXPIREAT', holders, at)
    else
      redis.call('PEXPIREAT', holders, at, 'GT')
    end
    return {1, 0, 0, fence}
  end
  if claim == 0 then
    local first = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
--!include lib/hold-read.lua
    return {0, math.max(1, tonumber(first[2]) - now), 0, hold_read(record, now)}
  end
end

--!include lib/hold.lua
--!include lib/hold-read.lua
--!include lib/fence.lua
--!include lib/holders.lua
--!include lib/queue.lua
--!include lib/grant.lua
--!include lib/settle.lua

marks_seed(marks)
tenants_ready(now)
holders_prune(now)
-- An acquire leaves the typical hold as it is: read once, for every refusal's answer.
local hold = hold_read(record, now)

-- One caller (its arguments from ARGV[i]): {status, ms, fence or hold}, its `marked` left to settle.
local function join(i)
  local token, limit, weight, lease = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local claim, maxQueue = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local cap, tenantMax = tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7])
  local limitSet = false
  -- The permits held once the grants below are made (nil: not counted yet; queue_join changes none).
  local used = nil
  if redis.call('EXISTS', queue) == 1 then
    queue_prune(now)
    -- This caller's limit is now the id's limit as the store knows it, for the grants below (written
    -- only when it changes: a busy id's callers mostly pass the same).
    if redis.call('HGET', meta, '~l') ~= ARGV[i + 1] then redis.call('HSET', meta, '~l', ARGV[i + 1]) end
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
    reply = {1, 0, fence_next()}
  elseif redis.call('ZSCORE', expiry, token) then
    redis.call('ZADD', expiry, string.format('%d', now + claim), token)
    reply = {2, 0, 0}
  elseif redis.call('EXISTS', queue) == 0 and holders_used() + weight <= limit and fitsTenant then
    -- Nobody waits: the newcomer's turn is now.
    holders_add(token, weight, string.format('%d', now + lease))
    tenants_add(tenant, weight)
    reply = {1, 0, fence_next()}
  else
    local from, to = queue_tenant(tenant)
    if claim > 0 and ((maxQueue > 0 and redis.call('ZCARD', queue) >= maxQueue)
        or (tenantMax > 0 and redis.call('ZLEXCOUNT', queue, from, to) >= tenantMax)) then
      reply = {3, 0, 0}
    else
      -- Join (failing fast, only to see whether its turn is now), then grant in turn.
      local ends = now + claim
      if claim == 0 then ends = now + 1 end
      queue_join(token, ARGV[i + 2], ARGV[i + 1], ARGV[i + 6], ends)
      -- Unless set above (only settle deletes meta, at the end).
      if not limitSet then redis.call('HSET', meta, '~l', ARGV[i + 1]) end
      local _, fence = grant(now, token, lease, { limit = limit, used = used })
      if fence then
        reply = {1, 0, fence}
      elseif claim > 0 then
        reply = {2, 0, 0}
      else
        queue_drop(token)
        if fitsTenant then reply = {0, 0, 0} else reply = {4, 0, 0} end
      end
    end
  end
  -- A refusal's ms as this caller's own call would see them: before those after it step in (settle,
  -- at the end, removes no live holder).
  if reply[1] ~= 1 then
    reply[3] = hold
    if reply[1] == 4 then reply[2] = holders_next(now, tenant) else reply[2] = holders_next(now) end
  end
  return reply
end

if #ARGV == 8 then
  local reply = join(1)
  return {reply[1], reply[2], settle(now), reply[3]}
end
local out = {}
for i = 1, #ARGV, 8 do
  local ok, reply = pcall(join, i)
  if ok then
    for k = 1, 3 do out[#out + 1] = reply[k] end
  else
    -- This caller gets the error, as a call of its own would (its writes so far stay: a script is
    -- not rolled back); the next starts from what is stored, as its own call would.
    out[#out + 1] = 'ERR ' .. (type(reply) == 'table' and tostring(reply.err) or tostring(reply))
    out[#out + 1] = 0
    out[#out + 1] = 0
    marks_forget()
  end
end
out[#out + 1] = settle(now)
return out
