#!lua flags=no-writes,allow-oom
-- Who holds the lock and who waits for it; changes nothing.
-- KEYS: as lock-acquire.lua.
-- ARGV: none.
-- Reply: {holder, waiters}, each a flat list of token, weight (1), ms left; waiters in ticket order.
local lock, meta, queue, expiry, turns = KEYS[1], KEYS[2], KEYS[3], KEYS[4], nil
--!include lib/clock.lua
local now, now_us = clock()

local held = {}
-- '<token> <fence>[ <record>]', or '~ <fence>[ <record>]' while free (see lock-acquire.lua).
local value = redis.call('GET', lock)
local token = value and string.match(value, '^(%S+) %d+')
local ends = redis.call('PEXPIRETIME', lock) + 1
if token and token ~= '~' and ends > now then held = {token, 1, ends - now} end
local waiting = {}
-- One line, the tenant '': members are '\0<ticket>\0<token>' (see lib/queue.lua).
local line = redis.call('ZRANGE', queue, 0, -1)
for i = 1, #line do
  local token = string.sub(line[i], 18)
  local due = tonumber(redis.call('ZSCORE', expiry, token))
  if due and due > now then
    waiting[#waiting + 1] = token
    waiting[#waiting + 1] = 1
    waiting[#waiting + 1] = due - now
  end
end
return {held, waiting}
