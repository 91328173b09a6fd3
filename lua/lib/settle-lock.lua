-- How a lock's full path ends: the waiting room's keys live exactly until the last waiter lease
-- ends, and vanish with it. (The lock key expires with its own lease.) Needs queue.lua.
local function settle(now)
  local last = queue_latest()
  if not last or last <= now then
    redis.call('DEL', meta, queue, expiry)
    return
  end
  redis.call('PEXPIREAT', meta, last + 1)
  redis.call('PEXPIREAT', queue, last + 1)
  redis.call('PEXPIREAT', expiry, last + 1)
end

-- Hands a free lock to the head waiter, until its own waiter lease ends (its reservation), unless
-- its process claims it with a full ttl first. Announces "<reservation ms> <token>" on the channel
-- and returns the announcement (nil when nothing was granted).
local function grant(now)
  if redis.call('EXISTS', lock) == 1 then return nil end
  local head = queue_head('')
  if not head then return nil end
  local ends = tonumber(redis.call('ZSCORE', expiry, head))
  queue_drop(head)
  redis.call('SET', lock, head, 'PXAT', ends - 1)
  local announcement = (ends - now) .. ' ' .. head
  redis.call('PUBLISH', lock .. ':ch', announcement)
  return announcement
end
