import { describe, expect, it } from "vitest";
import { lock, memoryStore, ShutdownError, semaphore } from "../../src/index.js";
import { newRedis } from "../support/redis.js";

describe.each([
  { name: "memory", client: () => memoryStore() },
  { name: "redis", client: () => newRedis() },
])("a closed factory's readers ($name)", ({ client }) => {
  it("holders() and holder() are refused with ShutdownError, as stats() and count() are", async () => {
    const slots = semaphore({ client: client(), limit: 2 });
    const locks = lock({ client: client() });
    await Promise.all([slots.close(), locks.close()]);
    await expect(slots.stats("k")).rejects.toBeInstanceOf(ShutdownError);
    await expect(slots.holders("k")).rejects.toBeInstanceOf(ShutdownError);
    await expect(locks.holder("k")).rejects.toBeInstanceOf(ShutdownError);
  });
});
