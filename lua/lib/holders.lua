-- Semaphore holders. Expects the locals `holders`, a sorted set of lease ends in ms with one member per
-- permit, `tenants`, the tenant index (or nil when the call declared none), and `turns`, the waiting
-- tenants' turns (see queue.lua; or nil). A lease token is
-- '<random>' or '<random>@<tenant>' (random: base64url, no '@' or '~'); a holder of weight w is its
-- token plus '<random>~2[@<tenant>]' .. '<random>~w[@<tenant>]', all at one score, so permits used =
-- members, and no other key ever has to be read (or could be evicted apart) to know them.
-- Markers sit at negative scores, lease ends at positive ones: at -inf, '~' while waiters exist (see
-- settle.lua), '~t' while tenant holders exist (the index `tenants`, tenant -> permits held, is then
-- kept, and rebuilt from the holders if it was lost, or when '~r' says it counts pruned permits) and
-- '~h<record>', the id's typical hold (lib/hold.lua); '~f' at minus the last fence granted (see
-- lib/fence.lua: one ZADD moves it on).
-- Holders are ranged from '0', a bound no marker reaches.
-- Needs hold.lua and fence.lua, included before this, and the locals `now_us` (lib/clock.lua).

-- The markers, read once per call with their scores and kept in step with every marker this call
-- writes: the full path asks for them at many steps (the last fence, the typical hold, '~t', the
-- permits held), and each step read them again. `known_marks` maps '~' and '~t' to true, `h` to
-- the typical hold's marker, `f` to the last fence (0: none; `fenced`: the marker '~f' is there),
-- and counts the markers in `n` (holders_used).
-- Every marker write of the full path goes through mark_set, mark_clear, mark_move and fence_next.
local known_marks = nil

-- Takes `list`, the markers as `ZRANGEBYSCORE holders -inf (0 WITHSCORES` just answered, as the cache.
local function marks_seed(list)
  local m = { n = #list / 2, f = 0 }
  for i = 1, #list, 2 do
    local mark = list[i]
    local kind = string.sub(mark, 1, 2)
    if mark == '~f' then
      m.fenced = true
      if -list[i + 1] > m.f then m.f = -list[i + 1] end
    elseif kind == '~h' then
      m.h = mark
    else
      m[mark] = true
    end
  end
  known_marks = m
end

local function marks_now()
  if not known_marks then marks_seed(redis.call('ZRANGEBYSCORE', holders, '-inf', '(0', 'WITHSCORES')) end
  return known_marks
end

-- Forgets the cache: the next step reads the markers again (after a step that failed part-way).
local function marks_forget()
  known_marks = nil
end

-- The holders set was deleted: no marker is left.
local function marks_emptied()
  known_marks = { n = 0, f = 0 }
end

-- Sets the marker '~' or '~t'.
local function mark_set(mark)
  local m = marks_now()
  if m[mark] then return end
  redis.call('ZADD', holders, '-inf', mark)
  m[mark], m.n = true, m.n + 1
end

-- Clears the marker '~', '~t' or '~r'.
local function mark_clear(mark)
  local m = marks_now()
  if not m[mark] then return end
  redis.call('ZREM', holders, mark)
  m[mark], m.n = nil, m.n - 1
end

-- Moves the one marker of its kind ('h': the typical hold's) to `mark`: added
-- before the old one goes, so the set never empties (an emptied key would vanish with its expiry).
local function mark_move(kind, mark)
  local m = marks_now()
  local old = m[kind]
  if old == mark then return end
  redis.call('ZADD', holders, '-inf', mark)
  if old then redis.call('ZREM', holders, old) else m.n = m.n + 1 end
  m[kind] = mark
end

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

-- The tenant index is there (rebuilt from the holders if it was evicted apart from them, or if a
-- fast acquire pruned tenants' permits without it: the marker '~r').
local function tenants_ready(now)
  if not tenants then return end
  if marks_now()['~r'] then
    redis.call('DEL', tenants)
    mark_clear('~r')
  end
  if not marks_now()['~t'] or redis.call('EXISTS', tenants) == 1 then return end
  local live = redis.call('ZRANGEBYSCORE', holders, '0', '+inf')
  for i = 1, #live do
    local tenant = tenant_of(live[i])
    if tenant ~= '' then redis.call('ZINCRBY', tenants, 1, tenant) end
  end
  if redis.call('EXISTS', tenants) == 0 then mark_clear('~t') end
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
    mark_set('~t')
  elseif turns then
    tenant_unpark(tenant)
  end
end

-- Lapsed leases are reclaimed here rather than by a sweeper.
local function holders_prune(now)
  if tenants and marks_now()['~t'] then
    tenants_ready(now)
    local lapsed = redis.call('ZRANGEBYSCORE', holders, '0', string.format('%d', now))
    for i = 1, #lapsed do tenants_add(tenant_of(lapsed[i]), -1) end
  end
  redis.call('ZREMRANGEBYSCORE', holders, '0', string.format('%d', now))
end

-- Permits held, lapsed or not (the caller prunes first when it matters).
local function holders_used()
  return redis.call('ZCARD', holders) - marks_now().n
end

-- A heavy holder's members go in slices: Lua's unpack stops at 8,000 values (a weight past 4,000).
local HOLDERS_SLICE = 4000

local function holders_add(token, weight, ends)
  local members = holders_members(token, weight, ends)
  for from = 1, #members, HOLDERS_SLICE do
    redis.call('ZADD', holders, unpack(members, from, math.min(from + HOLDERS_SLICE - 1, #members)))
  end
end

-- The weight of a holder, counted from its members (when the caller does not say).
local function holders_weight(token)
  -- Each further member's name made alone: building all of them at each step (holders_members) cost
  -- O(weight^2), seconds of the server's time for a weight in the thousands.
  local at = string.find(token, '@', 1, true)
  local base, suffix = token, ''
  if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
  local w = 1
  while redis.call('ZSCORE', holders, base .. '~' .. (w + 1) .. suffix) do w = w + 1 end
  return w
end

-- Removes a holder (weight from the caller, or counted); returns the lease end it had and the
-- members (permits) removed, or false.
local function holders_remove(token, weight)
  local score = redis.call('ZSCORE', holders, token)
  if not score then return false end
  local w = weight or holders_weight(token)
  local members, removed = holders_members(token, w), 0
  for from = 1, #members, HOLDERS_SLICE do
    removed = removed + redis.call('ZREM', holders, unpack(members, from, math.min(from + HOLDERS_SLICE - 1, #members)))
  end
  tenants_add(tenant_of(token), -w)
  return tonumber(score), removed
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
  local first = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return 1
end

-- The latest lease end among holders, or nil.
local function holders_latest()
  local last = redis.call('ZRANGE', holders, '-1', '-1', 'WITHSCORES')
  if last[2] and tonumber(last[2]) > 0 then return tonumber(last[2]) end
  return nil
end

-- The last fence granted on the id (0 when none is kept).
local function fence_last()
  return marks_now().f
end

-- The fence of a grant made now; the marker's score moves on to it (the member stays: the set
-- never empties, and an emptied key would vanish with its expiry).
local function fence_next()
  local m = marks_now()
  local f = math.max(m.f + 1, now_us)
  redis.call('ZADD', holders, fence_text(-f), '~f')
  if not m.fenced then m.fenced, m.n = true, m.n + 1 end
  m.f = f
  return f
end

-- The typical hold's record (lib/hold.lua) and its marker; nil when there is none.
local function hold_last()
  local mark = marks_now().h
  if mark then return string.sub(mark, 3), mark end
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
  local record = hold_last()
  local avg, upto = string.match(record or '', '^(%d+):(%d+)$')
  avg, upto = hold_fold(tonumber(avg), tonumber(upto), now, ends, held)
  mark_move('h', string.format('~h%d:%d', avg, upto))
end
