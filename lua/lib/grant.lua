-- Admits waiters from the head, in ticket order, while the permits held, theirs
-- included, fit within both their own limit and the id's ('~l' in meta: the limit of
-- the latest acquire that met or joined the queue): a waiter that does not fit holds
-- back those behind it (strict order). A granted waiter holds its permits until its
-- own waiter lease ends (its reservation) unless its process claims them with a full
-- lease first, so a dead waiter blocks for at most one waiter lease.
-- Announces "<shortest reservation ms> <token> <token>..." on the id's channel, so other
-- processes know when an unclaimed grant could lapse, and returns that announcement
-- (nil when nothing was granted), so a release can also hand it to its own process.
-- Needs holders.lua and queue.lua; the caller ends with settle().
local function grant(now)
  local idLimit = tonumber(redis.call('HGET', meta, '~l'))
  local used = holders_used()
  local granted = {}
  local reserved = nil
  while true do
    local head = queue_head()
    if not head then break end
    local w, own = queue_info(head)
    if used + w > math.min(own, idLimit or own) then break end
    local ends = tonumber(redis.call('ZSCORE', expiry, head))
    queue_drop(head)
    holders_add(head, w, ends)
    used = used + w
    granted[#granted + 1] = head
    if not reserved or ends - now < reserved then reserved = ends - now end
  end
  if #granted == 0 then return nil end
  local announcement = reserved .. ' ' .. table.concat(granted, ' ')
  redis.call('PUBLISH', holders .. ':ch', announcement)
  return announcement
end
