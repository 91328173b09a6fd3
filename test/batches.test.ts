// The Redis store's gathered calls (src/store/coalesce.ts, redis/fast.ts): calls of one turn on one id
// go out as script calls of at most 16 items, a full one sent at once rather than at the end of the
// turn, and every caller still gets its own answer, in the order the calls were made.
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { redisStore } from "../src/index.js";
import { scripts } from "../src/store/lua.generated.js";
import { newRedis, uniquePrefix } from "./support/redis.js";

/** The fail-fast acquires' script calls the client sends, as the number of items each carries. */
function countTakes(redis: Redis): number[] {
  const items: number[] = [];
  const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
  (redis as unknown as { evalsha: unknown }).evalsha = (...args: unknown[]) => {
    const keys = Number(args[1]);
    // semaphore-take.lua: five arguments per item, or three for one item of weight 1.
    if (args[0] === scripts.semaphoreTake.sha) {
      const count = args.length - 2 - keys;
      items.push(count === 3 ? 1 : count / 5);
    }
    return evalsha(...args);
  };
  return items;
}

const clients: Redis[] = [];
afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

/** A connected client whose fail-fast acquires are counted, a store over it, and an id of its own. */
async function counted() {
  const redis = newRedis();
  clients.push(redis);
  await redis.ping();
  return { redis, sent: countTakes(redis), store: redisStore(redis), key: `{${uniquePrefix()}:k}` };
}

describe("calls gathered in one turn on the Redis store", () => {
  it("40 acquires in one turn: two go at once, the rest in calls of at most 16, each caller its own fence in order", async () => {
    const { redis, sent, store, key } = await counted();
    const calls = Array.from({ length: 40 }, (_, i) =>
      store.semaphore.acquire({ storeKey: key, token: `t${i}`, limit: 100, weight: 1, leaseMs: 10_000 }),
    );
    const replies = await Promise.all(calls);
    expect(sent).toEqual([1, 1, 16, 16, 6]);
    const fences = replies.map((reply) => (reply.acquired ? Number(reply.fence) : Number.NaN));
    expect(fences.every((fence, i) => i === 0 || fence > (fences[i - 1] as number))).toBe(true);
    expect(await redis.zcount(key, 0, "+inf")).toBe(40);
    await Promise.all(
      calls.map((_, i) => store.semaphore.release({ storeKey: key, token: `t${i}`, weight: 1, heldMs: undefined })),
    );
    expect(await redis.exists(key)).toBe(0);
    await store.close();
  });

  it("a batch of 16 goes out at once, before the turn ends; a smaller one at the turn's end", async () => {
    const { redis, sent, store, key } = await counted();
    const take = (i: number) =>
      store.semaphore.acquire({ storeKey: key, token: `t${i}`, limit: 100, weight: 1, leaseMs: 10_000 });
    // Two go at once, then ten are gathered: the ten wait for the end of the turn.
    const few = Array.from({ length: 12 }, (_, i) => take(i));
    expect(sent).toEqual([1, 1]);
    await Promise.all(few);
    expect(sent).toEqual([1, 1, 10]);
    // Two at once, then sixteen gathered: the sixteenth sends them, in the same turn.
    const many = Array.from({ length: 18 }, (_, i) => take(100 + i));
    expect(sent).toEqual([1, 1, 10, 1, 1, 16]);
    const replies = await Promise.all(many);
    expect(replies.every((reply) => reply.acquired)).toBe(true);
    expect(sent).toEqual([1, 1, 10, 1, 1, 16]);
    await store.close();
    await redis.del(key);
  });
});
