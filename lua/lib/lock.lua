-- The lock's full path: reading, taking, freeing and granting the lock key, and settling its
-- waiting room. Needs fence.lua and queue.lua, included before this, and the locals `lock`, `meta`,
-- `queue`, `expiry`, `now` and `now_us` (lib/clock.lua).

-- How a lock's full path ends: the waiting room's keys live exactly until the last waiter lease
-- ends, and vanish with it. (The lock key expires with its own lease.)
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

-- The lock's holder (nil when free), its last fence (0 when none is kept) and the rest of its value:
-- '' or ' <record>', the typical hold (lib/hold.lua). The value is '<token> <fence>[ <record>]', or
-- '~ <fence>[ <record>]' while free.
local function lock_read()
  local value = redis.call('GET', lock)
  if not value then return nil, 0, '' end
  local who, fence, rest = string.match(value, '^(%S+) (%d+)(.*)$')
  if who == '~' then return nil, tonumber(fence), rest end
  return who, tonumber(fence), rest
end

-- Ms until the lock's lease ends (1 when free: nothing to wait for).
local function lock_next(now)
  if not lock_read() then return 1 end
  return math.max(1, redis.call('PEXPIRETIME', lock) + 1 - now)
end

-- Takes the free lock for `token` until `ends`, with the next fence; returns it. `rest`, the rest
-- of the value (the typical hold), stays.
local function lock_take(token, ends, last, rest)
  local fence = math.max(last + 1, now_us)
  redis.call('SET', lock, token .. ' ' .. fence_text(fence) .. rest, 'PXAT', ends - 1)
  return fence
end

-- Frees the lock held with fence `last` (`rest`: the rest of its value): the key goes, unless the
-- clock has not passed that fence yet or the typical hold still counts; then the lock stays free,
-- keeping them, until then.
local function lock_free(last, rest)
  local keep = nil
  if last >= now_us then keep = fence_keep(last) end
  local upto = tonumber(string.match(rest, ':(%d+)$'))
  if upto and upto > now and (not keep or upto - 1 > keep) then keep = upto - 1 end
  if keep then
    redis.call('SET', lock, '~ ' .. fence_text(last) .. rest, 'PXAT', keep)
  else
    redis.call('DEL', lock)
  end
end

-- Hands a free lock to the head waiter, until its own waiter lease ends (its reservation), unless
-- its process claims it with a full ttl first. Announces "<reservation ms>\n<token>\n<fence>" on
-- the channel (as lib/grant.lua) and returns the announcement (nil when nothing was granted).
local function grant(now)
  local holder, last, rest = lock_read()
  if holder then return nil end
  local head = queue_head('')
  if not head then return nil end
  local ends = tonumber(redis.call('ZSCORE', expiry, head))
  queue_drop(head)
  local fence = lock_take(head, ends, last, rest)
  local announcement = (ends - now) .. '\n' .. head .. '\n' .. fence_text(fence)
  redis.call('PUBLISH', lock .. ':ch', announcement)
  return announcement
end
