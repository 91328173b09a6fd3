#!lua flags=allow-oom
-- The release of leases on a semaphore nobody waits for (semaphore-release.lua is the full path),
-- for one lease or several issued together; it defines only the few helpers it calls. The keys
-- keep their expiry: they still vanish with their latest lease. allow-oom: under maxmemory with
-- noeviction, a holder must still be able to keep and return what it holds.
-- KEYS: [1] holders, [2] tenants when a lease has one (see lib/holders.lua).
-- ARGV: per lease, token, weight and the ms it was held (-1: not known) (three each); or, for one
--   lease of weight 1 (almost every request), its token alone, or its token and the ms it was held.
-- Reply: {-1} when waiters exist (the marker), or when the tenant index must be rebuilt: the caller
--   runs semaphore-release.lua. Else, per lease, 1 when it was live, 0 when it was gone or had
--   lapsed (its members are removed either way): for one lease of weight 1, that number alone
--   rather than a table (Redis turns a table into a reply field by field). A live lease's hold is
--   folded into the id's typical hold (lib/hold.lua).
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
if tenants and tenanted and (rebuild or redis.call('EXISTS', tenants) == 0) then return {-1} end
local now, now_us = clock()

-- The typical hold's figures (lib/hold.lua), parsed when first needed.
local avg, upto, parsed, wrote = nil, nil, false, false
-- Members present (live or lapsed), markers aside.
local present = redis.call('ZCARD', holders) - nmarks
-- Three arguments per lease, or one or two for one lease of weight 1: its answer is a number.
local short = #ARGV < 3
local out, answer = nil, 0
if not short then out = {} end
-- The arguments the loop below reads: none when the straight line has served the one lease.
local nargs = #ARGV
-- Almost every release: one lease of weight 1, its hold not reported, no tenant. The loop below
-- does the same for it; this straight line runs a fraction of its Lua.
if #ARGV == 1 and not tenants then
  local score = redis.call('ZSCORE', holders, ARGV[1])
  if score then
    -- The last lease, and the clock has passed the last fence: its marker goes too (lib/fence.lua).
    if fenced and present == 1 and last < now_us then
      -- Nothing else in the set (no other marker): the key goes, one DEL rather than a ZREM of both.
      if nmarks == 1 then redis.call('DEL', holders) else redis.call('ZREM', holders, ARGV[1], '~f') end
      fenced = false
    else
      redis.call('ZREM', holders, ARGV[1])
    end
    present = present - 1
    if score + 0 > now then answer = 1 end
  end
  nargs = 0
end
for i = 1, nargs, 3 do
  -- Strings compared where no arithmetic needs the number (tonumber parses a string twice).
  local token, weight, held = ARGV[i], 1, -1
  if not short then
    if ARGV[i + 1] ~= '1' then weight = tonumber(ARGV[i + 1]) end
    if ARGV[i + 2] ~= '-1' then held = tonumber(ARGV[i + 2]) end
  elseif ARGV[2] then
    held = tonumber(ARGV[2])
  end
  local score = redis.call('ZSCORE', holders, token)
  if score then
    -- The tenant's sign matters only for a tenant's index or a heavier lease's further permits.
    local sign = (tenants or weight > 1) and string.find(token, '@', 1, true)
    -- The last of them, and the clock has passed the last fence (lib/fence.lua): its marker goes in
    -- the same ZREM.
    local gone = fenced and present == weight and last < now_us
    local removed
    if weight == 1 then
      -- The common case, without building a table for unpack.
      if gone then removed = redis.call('ZREM', holders, token, '~f') - 1 else removed = redis.call('ZREM', holders, token) end
    else
      local base, suffix = token, ''
      if sign then base, suffix = string.sub(token, 1, sign - 1), string.sub(token, sign) end
      local members = { token }
      for w = 2, weight do members[#members + 1] = base .. '~' .. w .. suffix end
      if gone then members[#members + 1] = '~f' end
      -- In slices: Lua's unpack stops at 8,000 values (a weight past 8,000).
      removed = 0
      for from = 1, #members, 4000 do
        removed = removed + redis.call('ZREM', holders, unpack(members, from, math.min(from + 3999, #members)))
      end
      if gone then removed = removed - #members + weight end
    end
    if gone then fenced = false end
    present = present - removed
    if sign and tenants then
      local tenant = string.sub(token, sign + 1)
      if tonumber(redis.call('ZINCRBY', tenants, -weight, tenant)) <= 0 then redis.call('ZREM', tenants, tenant) end
    end
  end
  local ends = score and score + 0
  if ends and ends > now then
    if short then answer = 1 else out[#out + 1] = 1 end
    if held >= 0 then
      if not parsed then
        avg, upto = string.match(record or '', '(%d+):(%d+)$')
        avg, upto, parsed = tonumber(avg), tonumber(upto), true
      end
--!include lib/hold.lua
      avg, upto = hold_fold(avg, upto, now, ends, held)
      wrote = true
    end
  elseif not short then
    out[#out + 1] = 0
  end
end
-- The record moves on (added before the old one goes).
if wrote then
  local mark = string.format('~h%d:%d', avg, upto)
  redis.call('ZADD', holders, '-inf', mark)
  if record and record ~= mark then redis.call('ZREM', holders, record) end
end
local tenantMark = tenanted
if tenants and tenanted and redis.call('EXISTS', tenants) == 0 then
  redis.call('ZREM', holders, '~t')
  tenantMark = false
end
-- The last holder gone, the key goes too, unless the clock has not passed the last fence yet
-- (lib/fence.lua) or the typical hold still counts (lib/hold.lua): then it stays, holding those
-- alone, until then.
if present == 0 and not tenantMark then
  -- The record's end as its text too, when this call did not fold it: PEXPIREAT takes it as it is.
  local upto_text = nil
  if not parsed and record then
    upto_text = string.match(record, ':(%d+)$')
    upto = upto_text and upto_text + 0
  end
  local keep = nil
  if fenced and last >= now_us then keep = math.floor(last / 1000) + 1 end
  if upto and upto > now and (not keep or upto > keep) then keep = upto end
  if keep then
    if keep ~= upto or not upto_text then upto_text = string.format('%d', keep) end
    redis.call('PEXPIREAT', holders, upto_text)
  elseif record or fenced then
    redis.call('DEL', holders)
  end
  -- Else the set held no marker either: the ZREM that emptied it removed the key already.
end
if short then return answer end
return out
