-- The waiting room, shared by semaphores and locks. Expects the locals:
--   queue   sorted set, all at score 0, ordered by member: '<tenant>\0<ticket, 15 digits>\0<token>', so
--           each tenant's waiters come in arrival order and a range query finds a tenant's first or last
--   expiry  sorted set: token -> waiter lease end, ms (a token is waiting iff it is here)
--   meta    hash: '?'..token -> "weight limit tenantLimit ticket" as the caller passed them (strings: a
--           limit of 2^53 must not turn into "9.007199254741e+15"); tenantLimit 0 for none; and '~v'
--   turns   sorted set: waiting tenant -> the tag of its next turn (nil for a lock: one line, no turns);
--           a tenant parked at its cap has its tag plus TURN_PARKED (see holders.lua, included before)
-- A lock's waiters are all the tenant ''. A waiter's own short lease is refreshed by its process; a
-- waiter whose process died lapses and stops blocking the ones behind it.

local function queue_tenant(tenant)
  return '[' .. tenant .. '\0', '(' .. tenant .. '\1'
end

local function queue_member(tenant, ticket, token)
  return tenant .. '\0' .. string.format('%015d', ticket) .. '\0' .. token
end

-- Weight, own limit, tenant cap (0: none) and ticket of a waiter. Without its entry (an evicted
-- meta hash), the most cautious reading: weight 1, limit 1 (granted only when nothing is held).
local function queue_info(token)
  local w, l, t, n = string.match(redis.call('HGET', meta, '?' .. token) or '', '^(%d+) (%d+) (%d+) (%d+)$')
  return tonumber(w) or 1, tonumber(l) or 1, tonumber(t) or 0, tonumber(n)
end

-- Drops a waiter (`ticket`, when the caller has just read it: one HGET less; `others`, true or
-- false, when the caller has just read whether its tenant's line holds another: one ZLEXCOUNT less).
-- Returns whether its tenant still has waiters, and so a turn (with turns; nil without).
local function queue_drop(token, ticket, others)
  local at = string.find(token, '@', 1, true)
  local tenant = at and string.sub(token, at + 1) or ''
  if not ticket then ticket = select(4, queue_info(token)) end
  if ticket then
    redis.call('ZREM', queue, queue_member(tenant, ticket, token))
  else
    -- Its entry was lost: find it in its tenant's line.
    local from, to = queue_tenant(tenant)
    local line = redis.call('ZRANGEBYLEX', queue, from, to)
    for i = 1, #line do
      if string.sub(line[i], -#token - 1) == '\0' .. token then redis.call('ZREM', queue, line[i]) end
    end
  end
  redis.call('ZREM', expiry, token)
  redis.call('HDEL', meta, '?' .. token)
  if turns then
    if others == nil then
      local from, to = queue_tenant(tenant)
      others = redis.call('ZLEXCOUNT', queue, from, to) > 0
    end
    if not others then
      redis.call('ZREM', turns, tenant)
      return false
    end
    -- Its first waiter may have changed (another weight, another cap): it may fit now. (The tenant
    -- '' has no cap, so it is never parked.)
    if tenant ~= '' then tenant_unpark(tenant) end
    return true
  end
end

local function queue_prune(now)
  local lapsed = redis.call('ZRANGEBYSCORE', expiry, '-inf', string.format('%d', now))
  for i = 1, #lapsed do queue_drop(lapsed[i]) end
end

-- The token of a tenant's first waiter, or nil; and whether another waits behind it (read in the
-- same range: a grant's queue_drop then needs no count).
local function queue_head(tenant)
  local from, to = queue_tenant(tenant)
  local line = redis.call('ZRANGEBYLEX', queue, from, to, 'LIMIT', '0', '2')
  if line[1] then return string.sub(line[1], #tenant + 18), line[2] ~= nil end
  return nil, false
end

-- Joins at the end of its tenant's line; a tenant new to the queue takes the turn after the last
-- one served. `weight`, `limit` and `tenantLimit` are the caller's arguments, kept as they came.
local function queue_join(token, weight, limit, tenantLimit, ends)
  local at = string.find(token, '@', 1, true)
  local tenant = at and string.sub(token, at + 1) or ''
  local from, to = queue_tenant(tenant)
  local last = redis.call('ZREVRANGEBYLEX', queue, to, from, 'LIMIT', '0', '1')[1]
  local ticket = 1
  if last then ticket = tonumber(string.sub(last, #tenant + 2, #tenant + 16)) + 1 end
  redis.call('ZADD', queue, '0', queue_member(tenant, ticket, token))
  redis.call('ZADD', expiry, string.format('%d', ends), token)
  redis.call('HSET', meta, '?' .. token, weight .. ' ' .. limit .. ' ' .. tenantLimit .. ' ' .. ticket)
  if turns and not redis.call('ZSCORE', turns, tenant) then
    redis.call('ZADD', turns, string.format('%d', (tonumber(redis.call('HGET', meta, '~v')) or 0) + 1), tenant)
  end
end

-- Keeps the waiter leases of these tokens (those still queued) for `claim` ms more.
local function queue_refresh(tokens, first, claim, now)
  local ends = string.format('%d', now + claim)
  for i = first, #tokens do redis.call('ZADD', expiry, 'XX', ends, tokens[i]) end
end

-- The latest waiter lease end, or nil.
local function queue_latest()
  local last = redis.call('ZRANGE', expiry, '-1', '-1', 'WITHSCORES')
  if last[2] then return tonumber(last[2]) end
  return nil
end
