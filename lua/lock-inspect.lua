#!lua flags=no-writes,allow-oom
-- Who holds the lock and who waits for it; changes nothing.
-- KEYS as lock-acquire.lua.
-- Returns {holder, waiters}, each a flat list token, weight (1), ms left; waiters in ticket order.
local lock, queue, expiry = KEYS[1], KEYS[2], KEYS[3]
--!include lib/clock.lua

local held = {}
local token = redis.call('GET', lock)
local ends = redis.call('PEXPIRETIME', lock) + 1
if token and ends > now then held = {token, 1, ends - now} end
local waiting = {}
local order = redis.call('ZRANGE', queue, 0, -1)
for i = 1, #order do
  local due = tonumber(redis.call('ZSCORE', expiry, order[i]))
  if due and due > now then
    waiting[#waiting + 1] = order[i]
    waiting[#waiting + 1] = 1
    waiting[#waiting + 1] = due - now
  end
end
return {held, waiting}
