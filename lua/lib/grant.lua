-- Grants waiters in turn. Over the waiting tenants in turn order (the tag of their next turn, then
-- their name), each tenant's first waiter: a tenant at its cap is parked (holders.lua: it holds back
-- nobody else, and is not read again until it could fit); the first whose waiter does not fit the
-- permits held (within its own limit and the id's, '~l' in meta: the limit of the latest acquire
-- that met or joined the queue) stops the grants (nobody overtakes it). Each grant serves a turn:
-- the tenant's next is one tag on, and '~v' (the tag of the last turn served) is where a newly
-- waiting tenant starts, so tenants are served in turn and a newcomer within one turn of the others.
-- Parking changes no outcome (a parked tenant is always at its cap: the grants would pass it over),
-- only the cost: each step reads the first tenant in turn, so a grant costs O(log tenants) however
-- many tenants wait at their caps.
-- A granted waiter holds its permits until its own waiter lease ends (its reservation) unless its
-- process claims them with a full lease first, so a dead waiter blocks for at most one waiter
-- lease. `self`, the caller of this very call, gets a full lease of `selfLease` ms instead, and is
-- told by the reply rather than announced.
-- Each grant gets its fence (lib/fence.lua), in the order made.
-- Announces "<shortest reservation ms>\n<token>\n<fence>\n<token>\n<fence>..." on the id's channel
-- (newline-separated: a tenant, and so a token, may hold spaces, never a control character), so
-- other processes know who was granted, with which fence, and when an unclaimed grant could
-- lapse; returns that announcement (nil when nothing was granted), so a release can also hand it
-- to its own process, the fence of `self` when it was granted, and the permits held after it.
-- `known`, from a caller that has just read or written them (a join: two calls less each time):
-- {limit = the id's limit ('~l', nil for none), used = the permits held, or nil to count}.
-- Needs fence.lua, holders.lua and queue.lua; the caller ends with settle().
local function grant(now, self, selfLease, known)
  local idLimit, used
  if known then idLimit, used = known.limit, known.used else idLimit = tonumber(redis.call('HGET', meta, '~l')) end
  if not used then used = holders_used() end
  local granted = {}
  local reserved = nil
  local selfFence = nil
  while true do
    -- Every permit of the id taken: no waiter fits (each weighs at least 1 and is held to the id's
    -- limit), so the grants stop before reading the queue. Parking skipped here changes no outcome.
    if idLimit and used >= idLimit then break end
    local turn = redis.call('ZRANGE', turns, '0', '0', 'WITHSCORES')
    -- None left, or only parked tenants: all at their caps.
    if not turn[1] or tonumber(turn[2]) >= TURN_PARKED then break end
    local tenant, tag = turn[1], tonumber(turn[2])
    local head, behind = queue_head(tenant)
    local w, own, cap, ticket = queue_info(head)
    if tenant ~= '' and cap > 0 and tenant_used(tenant) + w > cap then
      redis.call('ZADD', turns, string.format('%.0f', tag + TURN_PARKED), tenant)
    elseif used + w > math.min(own, idLimit or own) then
      break
    else
      -- Scores and tags go back to Redis as the text they came in (or as integers, '%d'): a Lua
      -- number handed to redis.call is printed with '%.17g', a multi-precision float print.
      local endsText = redis.call('ZSCORE', expiry, head)
      local ends = tonumber(endsText)
      local lineLeft = queue_drop(head, ticket, behind)
      redis.call('HSET', meta, '~v', turn[2])
      if lineLeft then redis.call('ZADD', turns, string.format('%d', tag + 1), tenant) end
      local fence = fence_next()
      if head == self then
        holders_add(head, w, string.format('%d', now + selfLease))
        selfFence = fence
      else
        holders_add(head, w, endsText)
        granted[#granted + 1] = head
        granted[#granted + 1] = fence_text(fence)
        if not reserved or ends - now < reserved then reserved = ends - now end
      end
      tenants_add(tenant, w)
      used = used + w
    end
  end
  if #granted == 0 then return nil, selfFence, used end
  local announcement = string.format('%d', reserved) .. '\n' .. table.concat(granted, '\n')
  redis.call('PUBLISH', holders .. ':ch', announcement)
  return announcement, selfFence, used
end
