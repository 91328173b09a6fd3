// The cheapest contended hand-off found with the guarantees the benchmark exercises (bench/HISTORY.md,
// "Contended hand-off, fifth round"): not leasehold, a floor to measure it against. A module with
// the face contended-side.mjs drives (`semaphore({ client, limit, prefix }).acquire(id, { waitMs })`
// answering a lease with `release()`), so both run side by side in one process:
//   node bench/floors/contended-side.mjs --port=6403 new=dist/esm/src/index.js floor=bench/floors/handoff-floor.mjs
// What it keeps: the server's clock (TIME) for every expiry, a token of 128 random bits, FIFO
// grants made inside the release script (a freed permit goes to the head waiter, reserved until its
// waiter lease ends), a fence per grant that grows (HINCRBY), waiter leases that lapse (a dead
// waiter blocks nobody for longer), a token-checked release (false once lapsed), the grant
// announced on pub/sub and in the release's reply, keys that expire when idle, the releases of one
// turn gathered into one call and the joins of one microtask drain into one call.
// What it leaves out: tenants and turns, weights, the typical hold, markers for fast paths, lease
// keeping (renewal, loss detection), waiter refresh, aborts, timeouts and unknown-outcome clean-up,
// NOSCRIPT recovery, close(). So leasehold cannot be cheaper than this with its guarantees on this
// machine, whatever its code does; the converse is not claimed.
import { randomBytes } from "node:crypto";

const JOIN = `
local H, Q, E, M = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local nowText = string.format('%d', now)
redis.call('ZREMRANGEBYSCORE', H, '0', nowText)
local lapsed = redis.call('ZRANGEBYSCORE', E, '-inf', nowText)
for i = 1, #lapsed do redis.call('ZREM', Q, lapsed[i]); redis.call('ZREM', E, lapsed[i]) end
local out, latest = {}, now
for i = 1, #ARGV, 4 do
  local token, limit, lease, claim = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  redis.call('HSET', M, 'l', ARGV[i + 1])
  if redis.call('ZCARD', Q) == 0 and redis.call('ZCARD', H) < limit then
    redis.call('ZADD', H, string.format('%d', now + lease), token)
    out[#out + 1] = 1
    out[#out + 1] = redis.call('HINCRBY', M, 'f', 1)
    if now + lease > latest then latest = now + lease end
  else
    redis.call('ZADD', Q, redis.call('HINCRBY', M, 'n', 1), token)
    redis.call('ZADD', E, string.format('%d', now + claim), token)
    out[#out + 1] = 2
    out[#out + 1] = 0
    if now + claim > latest then latest = now + claim end
  end
end
local at = string.format('%d', latest + 1)
for i = 1, 4 do redis.call('PEXPIREAT', KEYS[i], at, 'GT') end
for i = 1, 4 do redis.call('PEXPIREAT', KEYS[i], at, 'NX') end
return out
`;

const RELEASE = `
local H, Q, E, M = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', H, '0', string.format('%d', now))
local limit = tonumber(redis.call('HGET', M, 'l')) or 0
local used = redis.call('ZCARD', H)
local out, announced = {}, {}
for i = 1, #ARGV do
  local score = redis.call('ZSCORE', H, ARGV[i])
  if score then
    redis.call('ZREM', H, ARGV[i])
    used = used - 1
  end
  out[#out + 1] = (score and tonumber(score) > now) and 1 or 0
  local granted, reserved = {}, nil
  while used < limit do
    local head = redis.call('ZRANGE', Q, '0', '0')[1]
    if not head then break end
    local ends = redis.call('ZSCORE', E, head)
    redis.call('ZREM', Q, head)
    redis.call('ZREM', E, head)
    if ends and tonumber(ends) > now then
      redis.call('ZADD', H, ends, head)
      used = used + 1
      granted[#granted + 1] = head
      granted[#granted + 1] = redis.call('HINCRBY', M, 'f', 1)
      if not reserved or tonumber(ends) - now < reserved then reserved = tonumber(ends) - now end
    end
  end
  if reserved then
    local message = string.format('%d', reserved) .. '\\n' .. table.concat(granted, '\\n')
    redis.call('PUBLISH', H .. ':ch', message)
    announced[#announced + 1] = message
  end
end
for i = 1, #announced do out[#out + 1] = announced[i] end
return out
`;

const CLAIM_MS = 30_000;

export function semaphore({ client, limit, prefix, leaseMs = 60_000 }) {
  client.defineCommand("floorJoin", { numberOfKeys: 4, lua: JOIN });
  client.defineCommand("floorRelease", { numberOfKeys: 4, lua: RELEASE });
  const subscriber = client.duplicate();
  const ids = new Map();

  function idOf(name) {
    let id = ids.get(name);
    if (id !== undefined) return id;
    const key = `{${prefix}:${name}}`;
    id = {
      keys: [key, `${key}:q`, `${key}:e`, `${key}:m`],
      waiting: new Map(),
      joins: [],
      joinsOut: 0,
      releases: [],
      releasesOut: 0,
    };
    ids.set(name, id);
    subscriber.subscribe(`${key}:ch`);
    return id;
  }

  subscriber.on("message", (channel, message) => {
    const id = ids.get(channel.slice(prefix.length + 2, -4));
    if (id !== undefined) announced(id, message);
  });

  function announced(id, message) {
    const parts = message.split("\n");
    for (let i = 1; i + 1 < parts.length; i += 2) {
      const resolve = id.waiting.get(parts[i]);
      if (resolve === undefined) continue;
      id.waiting.delete(parts[i]);
      resolve(Number(parts[i + 1]));
    }
  }

  // Joins: gathered per microtask drain while one is out (as leasehold's), else at once.
  function sendJoins(id, batch) {
    id.joinsOut++;
    const args = [];
    for (const { token } of batch) args.push(token, limit, leaseMs, CLAIM_MS);
    client.floorJoin(...id.keys, ...args).then(
      (reply) => {
        id.joinsOut--;
        for (let i = 0; i < batch.length; i++) batch[i].answer(reply[2 * i], reply[2 * i + 1]);
      },
      (error) => {
        id.joinsOut--;
        for (const one of batch) one.fail(error);
      },
    );
  }
  function join(id, item) {
    if (id.joinsOut < 1 && id.joins.length === 0) return sendJoins(id, [item]);
    if (id.joins.length === 0) queueMicrotask(() => sendJoins(id, id.joins.splice(0)));
    id.joins.push(item);
  }

  // Releases: gathered per turn while two are out (as leasehold's), else at once.
  function sendReleases(id, batch) {
    id.releasesOut++;
    client.floorRelease(...id.keys, ...batch.map((one) => one.token)).then(
      (reply) => {
        id.releasesOut--;
        for (let i = batch.length; i < reply.length; i++) announced(id, reply[i]);
        for (let i = 0; i < batch.length; i++) batch[i].answer(reply[i] === 1);
      },
      (error) => {
        id.releasesOut--;
        for (const one of batch) one.fail(error);
      },
    );
  }
  function release(id, item) {
    if (id.releasesOut < 2 && id.releases.length === 0) return sendReleases(id, [item]);
    if (id.releases.length === 0) setImmediate(() => sendReleases(id, id.releases.splice(0)));
    id.releases.push(item);
  }

  const leaseOf = (id, token, fence) => ({
    token,
    fence,
    release: () => new Promise((answer, fail) => release(id, { token, answer, fail })),
  });

  return {
    acquire(name, { waitMs } = {}) {
      const id = idOf(name);
      const token = randomBytes(16).toString("base64url");
      return new Promise((resolve, reject) => {
        join(id, {
          token,
          answer: (status, fence) => {
            if (status === 1) return resolve(leaseOf(id, token, fence));
            if (!waitMs) return resolve(null);
            // Announced: in a release's reply (this process) or over pub/sub.
            id.waiting.set(token, (granted) => resolve(leaseOf(id, token, granted)));
          },
          fail: reject,
        });
      });
    },
  };
}
