// The cheapest acquire + release pair found that keeps the guarantees of a leasehold fast cycle
// (bench/HISTORY.md, "Redis cycle, fifth round"): the server's clock (TIME), a fence per grant
// greater than every earlier one on the id (the score of a marker '~f', kept until the clock has
// passed it), the waiters marker '~' that sends callers to the full path, a token-checked release
// answering 0 for a lapsed lease, every key with an expiry, one declared key. Left out, and so not a
// replacement for lua/semaphore-acquire-fast.lua and semaphore-release-fast.lua: the typical hold, tenants,
// weights, refusals' figures, batches of several calls. A floor to measure against, not a build.
import { createHash } from "node:crypto";

const sha = (source) => createHash("sha1").update(source).digest("hex");

/** KEYS[1] holders; ARGV token, limit, lease ms. Returns the fence, -1 (waiters) or -2 (full). */
const take = `local k = KEYS[1]
local marks = redis.call('ZRANGEBYSCORE', k, '-inf', '(0', 'WITHSCORES')
local last, nmarks = 0, #marks / 2
for i = 1, #marks, 2 do
  if marks[i] == '~' then return -1 end
  if marks[i] == '~f' then last = -(marks[i + 1] + 0) end
end
local time = redis.call('TIME')
local secs, micros = time[1] + 0, time[2] + 0
local now = secs * 1000 + (micros - micros % 1000) / 1000
local now_us = secs * 1000000 + micros
local card = redis.call('ZCARD', k) - nmarks
if card + 1 > ARGV[2] + 0 then
  card = card - redis.call('ZREMRANGEBYSCORE', k, '0', string.format('%d', now))
  if card + 1 > ARGV[2] + 0 then return -2 end
end
local fence = now_us
if last >= fence then fence = last + 1 end
local ends = now + ARGV[3]
redis.call('ZADD', k, string.format('%d', ends), ARGV[1], string.format('%d', -fence), '~f')
local at = ends + 1
if (fence - fence % 1000) / 1000 + 1 > at then at = (fence - fence % 1000) / 1000 + 1 end
if card == 0 and nmarks == 0 then
  redis.call('PEXPIREAT', k, string.format('%d', at))
else
  redis.call('PEXPIREAT', k, string.format('%d', at), 'GT')
end
return fence
`;

/** KEYS[1] holders; ARGV token. Returns 1 (was live), 0 (gone or lapsed) or -1 (waiters). */
const back = `local k = KEYS[1]
local marks = redis.call('ZRANGEBYSCORE', k, '-inf', '(0', 'WITHSCORES')
local last, nmarks = 0, #marks / 2
for i = 1, #marks, 2 do
  if marks[i] == '~' then return -1 end
  if marks[i] == '~f' then last = -(marks[i + 1] + 0) end
end
local time = redis.call('TIME')
local secs, micros = time[1] + 0, time[2] + 0
local now = secs * 1000 + (micros - micros % 1000) / 1000
local now_us = secs * 1000000 + micros
local score = redis.call('ZSCORE', k, ARGV[1])
if not score then return 0 end
if redis.call('ZCARD', k) - nmarks == 1 and last < now_us then
  redis.call('DEL', k)
else
  redis.call('ZREM', k, ARGV[1])
end
if score + 0 > now then return 1 end
return 0
`;

export const floorScripts = {
  take: { source: take, sha: sha(take) },
  back: { source: back, sha: sha(back) },
};
