-- Semaphore holders. Expects the locals `holders`, a sorted set of lease ends in ms with one member per
-- permit, `tenants`, the tenant index (or nil when the call declared none), and `turns`, the waiting
-- tenants' turns (see queue.lua; or nil). A lease token is
-- '<random>' or '<random>@<tenant>' (random: base64url, no '@' or '~'); a holder of weight w is its
-- token plus '<random>~2[@<tenant>]' .. '<random>~w[@<tenant>]', all at one score, so permits used =
-- members, and no other key ever has to be read (or could be evicted apart) to know them.
-- Markers sit at negative scores, lease ends at positive ones: at -inf, '~' while waiters exist (see
-- settle.lua), '~t' while tenant holders exist (the index `tenants`, tenant -> permits held, is then
-- kept, and rebuilt from the holders if it was lost) and '~h<record>', the id's typical hold
-- (lib/hold.lua); '~f' at minus the last fence granted (see lib/fence.lua, included before this:
-- one ZADD moves it on). Earlier builds kept the fence as '~f<fence>' at -inf: read, and removed.
-- Holders are ranged from '0', a bound no marker reaches.

-- The tenant of a member or token: what follows its first '@' ('' for none).
local function tenant_of(member)
  local at = string.find(member, '@', 1, true)
  if at then return string.sub(member, at + 1) end
  return ''
end

-- The members of one holder of weight w, for ZADD (each preceded by `score`) or ZREM.
local function holders_members(token, weight, score)
  local at = string.find(token, '@', 1, true)
  local base, suffix = token, ''
  if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
  local members = {}
  for i = 1, weight do
    if score then members[#members + 1] = score end
    if i == 1 then members[#members + 1] = token else members[#members + 1] = base .. '~' .. i .. suffix end
  end
  return members
end

-- The tenant index is there (rebuilt from the live holders if it was evicted apart from them).
local function tenants_ready(now)
  if not tenants or not redis.call('ZSCORE', holders, '~t') or redis.call('EXISTS', tenants) == 1 then return end
  local live = redis.call('ZRANGEBYSCORE', holders, '0', '+inf')
  for i = 1, #live do
    local tenant = tenant_of(live[i])
    if tenant ~= '' then redis.call('ZINCRBY', tenants, 1, tenant) end
  end
  if redis.call('EXISTS', tenants) == 0 then redis.call('ZREM', holders, '~t') end
end

-- Permits held by a tenant.
local function tenant_used(tenant)
  if tenant == '' or not tenants then return 0 end
  return tonumber(redis.call('ZSCORE', tenants, tenant)) or 0
end

-- A waiting tenant found at its cap is parked (lib/grant.lua): its turn's tag is kept, raised by
-- TURN_PARKED, so that it sorts after every tenant that may be served and the grants stop reading it
-- until it could fit again: when one of its permits returns (here) or its first waiter changes
-- (queue_drop). Reading every capped tenant on every grant made a grant cost O(tenants).
local TURN_PARKED = 2 ^ 50

local function tenant_unpark(tenant)
  local tag = tonumber(redis.call('ZSCORE', turns, tenant))
  if tag and tag >= TURN_PARKED then redis.call('ZADD', turns, string.format('%.0f', tag - TURN_PARKED), tenant) end
end

local function tenants_add(tenant, permits)
  if tenant == '' or not tenants then return end
  if tonumber(redis.call('ZINCRBY', tenants, permits, tenant)) <= 0 then redis.call('ZREM', tenants, tenant) end
  if permits > 0 then
    redis.call('ZADD', holders, '-inf', '~t')
  elseif turns then
    tenant_unpark(tenant)
  end
end

-- Lapsed leases are reclaimed here rather than by a sweeper.
local function holders_prune(now)
  if tenants and redis.call('ZSCORE', holders, '~t') then
    tenants_ready(now)
    local lapsed = redis.call('ZRANGEBYSCORE', holders, '0', now)
    for i = 1, #lapsed do tenants_add(tenant_of(lapsed[i]), -1) end
  end
  redis.call('ZREMRANGEBYSCORE', holders, '0', now)
end

-- Permits held, lapsed or not (the caller prunes first when it matters).
local function holders_used()
  return redis.call('ZCOUNT', holders, '0', '+inf')
end

local function holders_add(token, weight, ends)
  redis.call('ZADD', holders, unpack(holders_members(token, weight, ends)))
end

-- The weight of a holder, counted from its members (when the caller does not say).
local function holders_weight(token)
  local w = 1
  while redis.call('ZSCORE', holders, holders_members(token, w + 1)[w + 1]) do w = w + 1 end
  return w
end

-- Removes a holder (weight from the caller, or counted); returns the lease end it had, or false.
local function holders_remove(token, weight)
  local score = redis.call('ZSCORE', holders, token)
  if not score then return false end
  local w = weight or holders_weight(token)
  redis.call('ZREM', holders, unpack(holders_members(token, w)))
  tenants_add(tenant_of(token), -w)
  return tonumber(score)
end

-- Ms until the nearest lease (of `tenant`, when given) ends: when a permit frees at the latest.
local function holders_next(now, tenant)
  if tenant and tenant ~= '' then
    local live = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES')
    for i = 1, #live, 2 do
      if tenant_of(live[i]) == tenant then return math.max(1, tonumber(live[i + 1]) - now) end
    end
    return 1
  end
  local first = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return 1
end

-- The latest lease end among holders, or nil.
local function holders_latest()
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if last[2] and tonumber(last[2]) > 0 then return tonumber(last[2]) end
  return nil
end

-- The last fence granted on the id (0 when none is kept), and an old-style marker, if one is left.
local function fence_last()
  local last = -(tonumber(redis.call('ZSCORE', holders, '~f')) or 0)
  local legacy = nil
  for _, mark in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', '-inf')) do
    if string.sub(mark, 1, 2) == '~f' then
      legacy = mark
      if tonumber(string.sub(mark, 3)) > last then last = tonumber(string.sub(mark, 3)) end
    end
  end
  return last, legacy
end

-- The fence of a grant made now; the marker's score moves on to it (the member stays: the set
-- never empties, and an emptied key would vanish with its expiry).
local function fence_next()
  local last, legacy = fence_last()
  local f = math.max(last + 1, now_us)
  redis.call('ZADD', holders, fence_text(-f), '~f')
  if legacy then redis.call('ZREM', holders, legacy) end
  return f
end

-- The typical hold's record (lib/hold.lua) and its marker; nil when there is none.
local function hold_last()
  local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '-inf')
  for i = 1, #marks do
    if string.sub(marks[i], 1, 2) == '~h' then return string.sub(marks[i], 3), marks[i] end
  end
  return nil, nil
end

-- Until when the typical hold's record counts, while it does (the id's keys are kept until then); nil when none does.
local function hold_until(now)
  local upto = tonumber(string.match(hold_last() or '', '(%d+)$'))
  if upto and upto > now then return upto end
  return nil
end

-- Folds the hold of a live lease that ended at `ends` into the record (lib/hold.lua), moving its
-- marker (added before the old one goes: the set never empties).
local function hold_add(now, ends, held)
  local record, marked = hold_last()
  local avg, upto = string.match(record or '', '^(%d+):(%d+)$')
  avg, upto = tonumber(avg), tonumber(upto)
--!include lib/hold.lua
  local mark = string.format('~h%d:%d', avg, upto)
  redis.call('ZADD', holders, '-inf', mark)
  if marked and marked ~= mark then redis.call('ZREM', holders, marked) end
end
