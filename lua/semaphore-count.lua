#!lua flags=no-writes,allow-oom
-- Count the live holders of a semaphore: lapsed, unpruned entries are not counted, nor a heavier
-- holder's further permits ('x~w[@tenant]'), nor the markers. Changes nothing.
-- KEYS: [1] holders (see lib/holders.lua).
-- ARGV: none.
-- Reply: the number of holders whose lease ends after now.
--!include lib/clock.lua
local now, now_us = clock()
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
local count = 0
for i = 1, #live do
  if not string.find(string.match(live[i], '^([^@]*)'), '~', 1, true) then count = count + 1 end
end
return count
