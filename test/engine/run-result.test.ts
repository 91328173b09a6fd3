// `run` has no async frame of its own (src/lease/keeper.ts): a body's result is tested for a `then`
// outside the try that ends the keeping. A regression: a result whose `then` getter throws (a proxy,
// a lazy record) escaped before the lease was given back, so the permit stayed held and renewed for
// ever. The throw is the body's failure, and the lease is given back, as with `await fn(lease)`.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { memoryStore, redisStore, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis } from "../support/redis.js";

const poisoned = () => ({
  // biome-ignore lint/suspicious/noThenProperty: the very object this test needs: a then getter that throws.
  get then(): never {
    throw new Error("no then here");
  },
});

const stores: [string, () => Store][] = [
  ["memory", () => memoryStore()],
  ["redis", () => redisStore(newRedis())],
];

describe.each(stores)("run with a result whose then getter throws (%s)", (_name, make) => {
  it("rejects with the body's error and gives the permit back", async () => {
    const slots = semaphore({ client: make(), limit: 1, leaseMs: 2_000, heartbeatMs: 200 });
    const id = randomUUID();
    await expect(slots.run(id, poisoned)).rejects.toThrow("no then here");
    expect(await slots.count(id)).toBe(0);
    await slots.close?.();
  });
});
