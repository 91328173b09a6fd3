-- Hands a free lock to the head waiter, for its claim window, until its process
-- claims it with a full ttl. Announces "<claim window ms> <token>" on the
-- channel. Needs queue.lua and the local `lock`.
local function grant(now, channel)
  if redis.call('EXISTS', lock) == 1 then return end
  local head = queue_head()
  if not head then return end
  local _, _, claim = queue_info(head)
  queue_drop(head)
  redis.call('SET', lock, head, 'PX', claim)
  redis.call('PUBLISH', channel, claim .. ' ' .. head)
end
