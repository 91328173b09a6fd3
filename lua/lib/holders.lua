-- Semaphore holders. Expects the local `holders`: a sorted set of lease ends in ms, one member
-- per permit: a holder of weight w is its token plus 'token~2' .. 'token~w' (tokens never hold
-- '~'), all at the same score, so permits used = members, and no other key ever has to be read
-- (or could be evicted apart) to know them. The marker '~' at score -inf says waiters exist
-- (see lib/settle.lua); lapsed leases are pruned from '(-inf', a range that never takes it.

-- Lapsed leases are reclaimed here rather than by a sweeper.
local function holders_prune(now)
  redis.call('ZREMRANGEBYSCORE', holders, '(-inf', now)
end

-- Permits held, lapsed or not (the caller prunes first when it matters).
local function holders_used()
  local card = redis.call('ZCARD', holders)
  if card > 0 and redis.call('ZSCORE', holders, '~') then card = card - 1 end
  return card
end

-- The members of one holder of weight w, for ZADD (with its score) or ZREM.
local function holders_members(token, weight, score)
  local members = {}
  for i = 1, weight do
    if score then members[#members + 1] = score end
    if i == 1 then members[#members + 1] = token else members[#members + 1] = token .. '~' .. i end
  end
  return members
end

local function holders_add(token, weight, ends)
  redis.call('ZADD', holders, unpack(holders_members(token, weight, ends)))
end

-- The weight of a holder, counted from its members (when the caller does not say).
local function holders_weight(token)
  local w = 1
  while redis.call('ZSCORE', holders, token .. '~' .. (w + 1)) do w = w + 1 end
  return w
end

-- Removes a holder (weight from the caller, or counted); returns the lease end it had, or false.
local function holders_remove(token, weight)
  local score = redis.call('ZSCORE', holders, token)
  if not score then return false end
  redis.call('ZREM', holders, unpack(holders_members(token, weight or holders_weight(token))))
  return tonumber(score)
end

-- Ms until the nearest lease ends: when a permit frees at the latest.
local function holders_next(now)
  local first = redis.call('ZRANGEBYSCORE', holders, '(-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if first[2] then return math.max(1, tonumber(first[2]) - now) end
  return 1
end

-- The latest lease end among holders, or nil.
local function holders_latest()
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  if last[1] and last[1] ~= '~' then return tonumber(last[2]) end
  return nil
end
