// A lock and a semaphore made with the same prefix hold the same id at once, each with keys and a
// grant channel of its own (issue #27, defect 4): neither refuses, counts or wakes the other.
import { describe, expect, it } from "vitest";
import { lock, semaphore } from "../../../src/index.js";
import { newRedis, uniquePrefix } from "../../support/redis.js";
import { type AnyCall, eventually, mapCalls, storesUnderTest } from "../../support/stores.js";

describe.each(storesUnderTest)("a lock and a semaphore of one prefix and id on the $name store", ({ make, redis }) => {
  it("both hold at once, count apart, and grant their own waiters only", async () => {
    const prefix = uniquePrefix();
    // The store keys each kind's calls name, and those the waiters watch.
    const keys = { semaphore: new Set<string>(), lock: new Set<string>(), watch: new Set<string>() };
    const store = mapCalls(make(), (name, real) => (call: never) => {
      const group = name === "watch" ? "watch" : (name.split(".")[0] as "semaphore" | "lock");
      keys[group].add((call as { storeKey: string }).storeKey);
      return (real as AnyCall)(call);
    });
    // Every grant announced on Redis under the prefix: its channel and what it says.
    const heard: { channel: string; message: string }[] = [];
    const listener = redis === undefined ? undefined : newRedis();
    if (listener !== undefined) {
      listener.on("pmessage", (_pattern: string, channel: string, message: string) => heard.push({ channel, message }));
      await listener.psubscribe(`{${prefix}:*`);
    }

    const slots = semaphore({ client: store, limit: 2, prefix });
    const locks = lock({ client: store, prefix });
    const permits = await slots.acquire("k", { weight: 2, owner: "semaphore-holder" });
    const held = await locks.acquire("k", { owner: "lock-holder" });
    expect(permits).not.toBeNull();
    expect(held).not.toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: 2, holders: 1, waiting: 0 });
    expect(await locks.stats("k")).toMatchObject({ held: true });
    expect(await slots.holders("k")).toMatchObject([{ owner: "semaphore-holder" }]);
    expect(await locks.holder("k")).toMatchObject({ owner: "lock-holder", token: held?.token });
    // Full, each of its own: a second caller of either kind is refused.
    expect(await slots.acquire("k")).toBeNull();
    expect(await locks.acquire("k")).toBeNull();

    const lockWaiter = locks.acquire("k", { waitMs: 20_000, owner: "lock-waiter" });
    const semaphoreWaiter = slots.acquire("k", { waitMs: 20_000, owner: "semaphore-waiter" });
    await eventually(async () => (await slots.stats("k")).waiting === 1);
    // The lock's waiters, read from the key its calls name (the engine has no reading of them).
    const lockWaiters = async () => (await store.lock.inspect({ storeKey: [...keys.lock][0] as string })).waiters.length;
    await eventually(async () => (await lockWaiters()) === 1);

    // The semaphore's release grants its waiter, and nothing of the lock moves.
    expect(await permits?.release()).toBe(true);
    const granted = await semaphoreWaiter;
    expect(granted).not.toBeNull();
    expect(await locks.holder("k")).toMatchObject({ owner: "lock-holder" });
    expect(await lockWaiters()).toBe(1);
    expect(await slots.stats("k")).toMatchObject({ used: 1, holders: 1, waiting: 0 });

    expect(await held?.release()).toBe(true);
    const next = await lockWaiter;
    expect(next).not.toBeNull();
    expect(await locks.holder("k")).toMatchObject({ owner: "lock-waiter" });
    expect(await slots.holders("k")).toMatchObject([{ owner: "semaphore-waiter" }]);

    expect(await granted?.release()).toBe(true);
    expect(await next?.release()).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0, waiting: 0 });
    expect(await locks.stats("k")).toMatchObject({ held: false });

    // No key a semaphore call names is one a lock call names; each watch is of one kind's key.
    expect([...keys.semaphore].filter((key) => keys.lock.has(key))).toEqual([]);
    for (const key of keys.watch) expect(keys.semaphore.has(key) !== keys.lock.has(key)).toBe(true);

    if (listener !== undefined) {
      // Each grant on the channel of its own kind: two channels, neither carrying the other's token.
      await eventually(() => heard.some(({ message }) => message.includes(next?.token as string)));
      const channelOf = (token: string | undefined) => heard.find(({ message }) => message.includes(token as string))?.channel;
      const [semaphoreChannel, lockChannel] = [channelOf(granted?.token), channelOf(next?.token)];
      expect(semaphoreChannel).toBeDefined();
      expect(lockChannel).toBeDefined();
      expect(semaphoreChannel).not.toBe(lockChannel);
      const on = (channel: string | undefined) => heard.filter((h) => h.channel === channel).map((h) => h.message);
      expect(on(lockChannel).some((message) => message.includes(granted?.token as string))).toBe(false);
      expect(on(semaphoreChannel).some((message) => message.includes(next?.token as string))).toBe(false);
      await listener.punsubscribe();
    }
  });
});
