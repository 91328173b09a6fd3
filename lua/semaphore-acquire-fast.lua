#!lua
-- The fail-fast acquire of a semaphore nobody waits for (semaphore-acquire.lua is the full path),
-- for one caller or for several issued together (the store coalesces the calls of one turn on one
-- id, in the order they were made). Almost every request makes this call, so it declares the
-- holders set alone (and the tenant index when a caller has a tenant) and defines only the few
-- helpers it calls. The shebang has no allow-oom: at maxmemory with noeviction, taking a new lease
-- is refused up front (OOM).
-- KEYS: [1] holders, [2] tenants when a caller has one (see lib/holders.lua).
-- ARGV: per call, token, limit, lease ms, weight, tenant cap (0: none) (five each); or, for one call
--   of weight 1 and no cap (almost every request), token, limit and lease ms alone.
-- Reply: {-1} when waiters exist (the marker) or the tenant index must be rebuilt: the caller runs
--   semaphore-acquire.lua. Else two numbers per call: 0 and its fence when it holds its permits
--   (lib/fence.lua: the calls' fences follow one another, in order); when refused, the ms until the
--   nearest lease ends (negative: refused because its tenant is at its cap, the ms until the
--   tenant's own nearest lease ends) and the id's typical hold (lib/hold.lua; 0: none). A call of
--   three arguments that holds gets its fence alone, a number rather than a table: Redis turns a
--   table into a reply field by field (it looks up 'err', 'ok' and five more names first).
local holders, tenants = KEYS[1], KEYS[2]
--!include lib/clock.lua

-- The holders set's markers (every member at a negative score; see lib/holders.lua), read here
-- rather than by a helper: a Lua function is made anew on every call of its script, and this is
-- almost every request's. '~' (waiters: the full script, {-1}), '~f' (the last fence, as its
-- negated score: lib/fence.lua), '~h<record>' (the typical hold, lib/hold.lua), '~t' (tenant
-- holders), '~r' (the tenant index counts permits pruned without it: rebuild it first).
local marks = redis.call('ZRANGEBYSCORE', holders, '-inf', '(0', 'WITHSCORES')
local nmarks = #marks / 2
local last, fenced, tenanted, rebuild, record = 0, false, false, false, nil
for i = 1, #marks, 2 do
  local mark = marks[i]
  if mark == '~' then return {-1} end
  if mark == '~f' then
    local f = -(marks[i + 1] + 0)
    if f > last then last = f end
    fenced = true
  elseif mark == '~t' then
    tenanted = true
  elseif mark == '~r' then
    rebuild = true
  elseif string.sub(mark, 1, 2) == '~h' then
    record = mark
  end
end
-- The index must be there and count only present members ('~r': rebuild it), else the full script
-- rebuilds it. Without the index declared (no caller of this call has a tenant), tenants holding
-- matter only to a pruning of lapsed holders, which then marks the index for rebuilding: every call
-- is served in its turn (a call asked again would be served after the calls issued after it).
if tenanted and tenants and (rebuild or redis.call('EXISTS', tenants) == 0) then return {-1} end
local now, now_us = clock()

local card = redis.call('ZCARD', holders) - nmarks
-- Almost every request: one call of weight 1, no tenant, room for it. The loop below does the same
-- for it, and this straight line runs a fraction of the loop's Lua (the interpreter was about a
-- tenth of the cycle's instructions): same commands, same answer, the fence alone.
if #ARGV == 3 and card < ARGV[2] + 0 and not string.find(ARGV[1], '@', 1, true) then
  local ends = now + ARGV[3]
  if now_us > last then last = now_us else last = last + 1 end
  redis.call('ZADD', holders, string.format('%d', ends), ARGV[1], string.format('%d', -last), '~f')
  -- As below: until the lease ends, and the clock has passed the fence; a new key gets its first expiry.
  local at = ends + 1
  if last >= ends * 1000 then at = (last - last % 1000) / 1000 + 1 end
  if card == 0 and nmarks == 0 then
    redis.call('PEXPIREAT', holders, string.format('%d', at))
  else
    redis.call('PEXPIREAT', holders, string.format('%d', at), 'GT')
  end
  return last
end
-- Five arguments per call, or three for one call of weight 1 without a cap.
local step = 5
if #ARGV == 3 then step = 3 end
-- A set with no member at all is a new key (as is one pruning empties): it gets its first expiry.
local fresh = card == 0 and nmarks == 0
-- Whether `last` moved on without the marker (a grant that did not write it in its own ZADD).
local stale = false
local out = {}
local latest = nil
local hold = nil
for i = 1, #ARGV, step do
  -- Numbers read by arithmetic (tonumber parses twice), strings compared where none is needed.
  local token, limit, lease = ARGV[i], ARGV[i + 1] + 0, ARGV[i + 2] + 0
  local weight, cap = 1, 0
  if step == 5 then
    if ARGV[i + 3] ~= '1' then weight = tonumber(ARGV[i + 3]) end
    if ARGV[i + 4] ~= '0' then cap = tonumber(ARGV[i + 4]) end
  end
  local at = string.find(token, '@', 1, true)
  local tenant = at and string.sub(token, at + 1) or ''
  local used = 0
  if tenant ~= '' then used = tonumber(redis.call('ZSCORE', tenants, tenant)) or 0 end
  -- Lapsed leases are reclaimed only when they stand in the way: with room to spare they cost nothing.
  if card + weight > limit or (cap > 0 and used + weight > cap) then
    -- Numbers passed to redis.call as text: Redis 7.0 prints a Lua number with '%.17g' (3,600
    -- instructions each), an integer sprintf costs half that.
    local upto_now = string.format('%d', now)
    if tenanted then
      local lapsed = redis.call('ZRANGEBYSCORE', holders, '0', upto_now)
      for j = 1, #lapsed do
        local t = string.find(lapsed[j], '@', 1, true)
        if t and not tenants then
          -- A tenant's permit goes without its index: the next call that reads the index rebuilds it.
          if not rebuild then
            redis.call('ZADD', holders, '-inf', '~r')
            rebuild, nmarks = true, nmarks + 1
          end
        elseif t then
          if tonumber(redis.call('ZINCRBY', tenants, -1, string.sub(lapsed[j], t + 1))) <= 0 then
            redis.call('ZREM', tenants, string.sub(lapsed[j], t + 1))
          end
        end
      end
    end
    local pruned = redis.call('ZREMRANGEBYSCORE', holders, '0', upto_now)
    -- The first call's count is still the ZCARD's (nothing written yet): what was pruned comes off
    -- it (markers sit below 0, never pruned). A later call's may count a refresh of another weight.
    if i == 1 then card = card - pruned else card = redis.call('ZCARD', holders) - nmarks end
    fresh = fresh or card + nmarks == 0
    if tenant ~= '' then used = tonumber(redis.call('ZSCORE', tenants, tenant)) or 0 end
  end
  -- A token already holding (a re-sent acquire) is refreshed in place, never counted twice. With
  -- room for one permit, one ZADD adds (or refreshes) it and moves the fence marker to its fence:
  -- its count of members added tells the two cases apart (the marker is new only when `fenced` is not).
  local ends = now + lease
  local holding, done = nil, false
  if weight == 1 and card + 1 <= limit and (cap == 0 or used + 1 <= cap) then
    if now_us > last then last = now_us else last = last + 1 end
    -- Whole numbers as '%d' (an integer sprintf): the default '%.17g' costs the server several times more.
    local new = redis.call('ZADD', holders, string.format('%d', ends), token, string.format('%d', -last), '~f')
    if not fenced then new, fenced, nmarks = new - 1, true, nmarks + 1 end
    holding, done = new == 0, true
  else
    holding = redis.call('ZSCORE', holders, token)
  end
  if holding or (card + weight <= limit and (cap == 0 or used + weight <= cap)) then
    if not done then
      local base, suffix = token, ''
      if at then base, suffix = string.sub(token, 1, at - 1), string.sub(token, at) end
      local members = { ends, token }
      for w = 2, weight do
        members[#members + 1] = ends
        members[#members + 1] = base .. '~' .. w .. suffix
      end
      -- In slices: Lua's unpack stops at 8,000 values (a weight past 4,000).
      for from = 1, #members, 4000 do redis.call('ZADD', holders, unpack(members, from, math.min(from + 3999, #members))) end
      if now_us > last then last = now_us else last = last + 1 end
      stale = true
    end
    if not holding then
      card = card + weight
      if tenant ~= '' then
        redis.call('ZINCRBY', tenants, weight, tenant)
        if not tenanted then
          redis.call('ZADD', holders, '-inf', '~t')
          tenanted, nmarks = true, nmarks + 1
        end
        redis.call('PEXPIREAT', tenants, ends + 1, 'GT')
        if redis.call('PEXPIRETIME', tenants) < 0 then redis.call('PEXPIREAT', tenants, ends + 1) end
      end
    end
    if not latest or ends > latest then latest = ends end
    if step == 5 then
      out[#out + 1] = 0
      out[#out + 1] = last
    end
  else
    if cap > 0 and used + weight > cap then
      -- The tenant's own figure: when one of its leases ends.
      local nearest = 1
      local live = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES')
      for j = 1, #live, 2 do
        local t = string.find(live[j], '@', 1, true)
        if t and string.sub(live[j], t + 1) == tenant then
          nearest = math.max(1, tonumber(live[j + 1]) - now)
          break
        end
      end
      out[#out + 1] = -nearest
    else
      local first = redis.call('ZRANGEBYSCORE', holders, '0', '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
      out[#out + 1] = math.max(1, tonumber(first[2]) - now)
    end
    -- The typical hold, read at the call's first refusal (an acquire never writes it).
    if not hold then
--!include lib/hold-read.lua
      hold = hold_read(record, now)
    end
    out[#out + 1] = hold
  end
end
if latest then
  -- The marker's score moves on to the last fence given (one ZADD: the member stays, the set never
  -- empties), unless the grant's own ZADD moved it.
  if stale then redis.call('ZADD', holders, string.format('%d', -last), '~f') end
  -- The key lives until its latest lease ends, and the clock has passed its fence. GT only ever
  -- raises an existing expiry (every script leaves the key with one). Not one ms sooner: the
  -- tenants' index lives as long, and must not outlive the set whose '~t' says it is kept.
  local at = latest + 1
  if last >= latest * 1000 then at = (last - last % 1000) / 1000 + 1 end
  at = string.format('%d', at)
  if fresh then
    redis.call('PEXPIREAT', holders, at)
  else
    redis.call('PEXPIREAT', holders, at, 'GT')
  end
  if step == 3 then return last end
end
return out
