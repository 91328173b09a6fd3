-- How a semaphore's full path ends: every key of the id lives exactly until the latest
-- lease or waiter lease it holds ends, and vanishes with it (no sweeper, no garbage; the
-- meta hash can never lapse before a holder it weighs or a waiter it describes). While
-- heavier holders or waiters exist, the marker '~' in the holders set sends the fast paths
-- (semaphore-take.lua, semaphore-return.lua) to the full scripts; it is cleared here once
-- they are gone. The holders set outlives the queue, so the marker cannot lapse before it.
-- Returns 1 when the marker is set, 0 when not: the store's hint for its next call.
-- Needs holders.lua and queue.lua.
local function settle(now)
  local latest = holders_latest()
  local waiters = queue_latest()
  if waiters and (not latest or waiters > latest) then latest = waiters end
  if not latest or latest <= now then
    redis.call('DEL', holders, meta, queue, expiry)
    return 0
  end
  local at = latest + 1
  local marked = waiters or redis.call('HEXISTS', meta, '~x') == 1
  if marked then
    redis.call('ZADD', holders, '-inf', '~')
    redis.call('PEXPIREAT', meta, at)
    redis.call('PEXPIREAT', queue, at)
    redis.call('PEXPIREAT', expiry, at)
  else
    redis.call('ZREM', holders, '~')
    redis.call('DEL', meta, queue, expiry)
  end
  redis.call('PEXPIREAT', holders, at)
  if marked then return 1 end
  return 0
end
