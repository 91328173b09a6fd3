-- Hands a free lock to the head waiter, for its claim window, until its process
-- claims it with a full ttl. Announces "<claim window ms> <token>" on the
-- channel, and returns that announcement (nil when nothing was granted), so a
-- release can also hand it to its own process. Needs queue.lua and the local `lock`.
local function grant(now, channel)
  if redis.call('EXISTS', lock) == 1 then return end
  local head = queue_head()
  if not head then return end
  local _, _, claim = queue_info(head)
  queue_drop(head)
  redis.call('SET', lock, head, 'PX', claim)
  local announcement = claim .. ' ' .. head
  redis.call('PUBLISH', channel, announcement)
  return announcement
end
