-- Admits waiters from the head, in ticket order, while their weights fit:
-- a heavy head holds back lighter waiters behind it (strict order). A granted
-- waiter holds its permits for its claim window until its process claims
-- them with a full lease, so a dead waiter wastes them only briefly.
-- Announces "<shortest claim window ms> <token> <token>..." on the channel, so
-- other processes know when an unclaimed grant could lapse, and returns that
-- announcement (nil when nothing was granted), so a release can also hand it
-- to its own process. Needs holders.lua and queue.lua.
local function grant(now, limit, channel)
  if not limit then return end
  local used = holders_used()
  local granted = {}
  local reserved = nil
  while true do
    local head = queue_head()
    if not head then break end
    local w, _, claim = queue_info(head)
    if used + w > limit then break end
    queue_drop(head)
    holders_add(head, w, now + claim)
    used = used + w
    granted[#granted + 1] = head
    if not reserved or claim < reserved then reserved = claim end
  end
  if #granted == 0 then return nil end
  local announcement = reserved .. ' ' .. table.concat(granted, ' ')
  redis.call('PUBLISH', channel, announcement)
  return announcement
end
