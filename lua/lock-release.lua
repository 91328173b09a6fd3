-- Delete a lock, if the token still holds it: a holder whose lock expired and
-- was taken by someone else must never delete the new holder's lock.
-- KEYS[1] lock key  ARGV[1] token
-- Returns 1 when released, 0 when the lock had already moved on.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
