-- Fences: every grant on an id gets a number greater than every earlier grant's on it, and the
-- holder passes it to what it protects, which refuses a write carrying an older one.
-- A fence is max(last + 1, now_us): the server's clock in microseconds, or one past the last fence
-- while the id's keys remember it (grants in the same microsecond, a clock stepped back). No key of
-- its own keeps the last one (no key outlives an idle id): it lives in the id's keys (a semaphore's
-- as the score of its marker '~f', negated: lib/holders.lua; a lock's in its value), and they are
-- kept until the clock has passed it, `fence_keep` (a key lives while now <= its PEXPIREAT, so at
-- floor(f / 1000) + 1 it is gone only once now_us > f). Once they are gone, the clock alone is ahead
-- of every fence given. A fence is written as a whole number ('%d': tostring would print 1.7e+15;
-- a double holds it exactly, as a sorted set's score too, up to 2^53 microseconds, in the year 2255).
local function fence_text(f)
  return string.format('%d', f)
end

local function fence_keep(f)
  return math.floor(f / 1000) + 1
end
