-- How a semaphore's full path ends: every key of the id lives exactly until the latest lease or
-- waiter lease it holds ends, and vanishes with it (no sweeper, no garbage). While waiters exist,
-- the marker '~' in the holders set sends the fast paths (semaphore-acquire-fast.lua, semaphore-release-fast.lua)
-- to the full scripts, so that a newcomer never jumps the queue and a freed permit is handed on;
-- it is cleared here once they are gone, with the waiting room's keys. The holders set outlives
-- the others, so its markers cannot lapse before what they stand for.
-- The holders set also keeps the last fence until the clock has passed it (see lib/fence.lua), and
-- the typical hold while it counts (lib/hold.lua).
-- Returns 1 when the marker is set, 0 when not: the store's hint for its next call.
-- Needs fence.lua, holders.lua and queue.lua.
local function settle(now)
  local latest = holders_latest()
  local waiters = queue_latest()
  if waiters and waiters <= now then waiters = nil end
  if waiters and (not latest or waiters > latest) then latest = waiters end
  local fence = fence_last()
  local counting = hold_until(now)
  if not latest or latest <= now then
    redis.call('DEL', meta, queue, expiry, tenants, turns)
    local keep = counting
    if fence >= now_us and (not keep or fence_keep(fence) > keep) then keep = fence_keep(fence) end
    if keep then
      -- Nothing is live, but the clock has not passed the last fence yet, or the typical hold
      -- still counts: they stay, alone, until then.
      redis.call('ZREMRANGEBYSCORE', holders, '0', '+inf')
      mark_clear('~')
      mark_clear('~t')
      redis.call('PEXPIREAT', holders, string.format('%d', keep))
    else
      redis.call('DEL', holders)
      marks_emptied()
    end
    return 0
  end
  local at = latest + 1
  -- Written once as an integer ('%d'): a number handed to redis.call is printed as a float each time.
  local atText = string.format('%d', at)
  if waiters then
    mark_set('~')
    redis.call('PEXPIREAT', meta, atText)
    redis.call('PEXPIREAT', queue, atText)
    redis.call('PEXPIREAT', expiry, atText)
    redis.call('PEXPIREAT', turns, atText)
  else
    mark_clear('~')
    redis.call('DEL', meta, queue, expiry, turns)
  end
  -- The tenant index exists only while '~t' is set (tenants_add sets it, and it is cleared here or
  -- by tenants_ready once the index is gone): an id without tenant holders asks nothing.
  if marks_now()['~t'] then
    if redis.call('EXISTS', tenants) == 1 then
      redis.call('PEXPIREAT', tenants, atText)
    else
      mark_clear('~t')
    end
  end
  redis.call('PEXPIREAT', holders, string.format('%d', math.max(at, fence_keep(fence), counting or 0)))
  if waiters then return 1 end
  return 0
end
