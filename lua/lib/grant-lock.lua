-- Hands a free lock to the head waiter, until its own waiter lease ends (its
-- reservation), unless its process claims it with a full ttl first. Announces
-- "<reservation ms> <token>" on the channel, and returns that announcement (nil
-- when nothing was granted), so a release can also hand it to its own process.
-- Needs queue.lua and the local `lock`; the caller runs queue_expire after.
local function grant(now, channel)
  if redis.call('EXISTS', lock) == 1 then return nil end
  local head = queue_head()
  if not head then return nil end
  local ends = tonumber(redis.call('ZSCORE', expiry, head))
  queue_drop(head)
  redis.call('SET', lock, head, 'PXAT', ends)
  local announcement = (ends - now) .. ' ' .. head
  redis.call('PUBLISH', channel, announcement)
  return announcement
end
