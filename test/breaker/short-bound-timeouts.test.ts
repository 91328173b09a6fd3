// A stall of this process is not the store's failure (issue #27, found by the engine model). A wait
// whose deadline passed while the event loop was blocked leaves the queue with what remains of one
// store timeout (1 ms after a long stall); that leave timing out, and the calls that were out during the
// stall timing out before their replies (already arrived) were read, marked a healthy store
// unreachable, so the next caller was refused with StoreUnavailableError.
import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { type AnyCall, eventually, mapCalls } from "../support/stores.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps this process from running, as a long GC pause or a busy request would. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // on purpose
  }
}

describe("a call left with a sliver of the store's bound", () => {
  it("a wait's leave after a stall past its deadline times out, and the store stays up", async () => {
    const client = newRedis();
    const inner = redisStore(client);
    // Leaves answer in 30 ms: longer than what remains of the bound after the stall, well within it otherwise.
    const slowLeaves: Store = {
      ...mapCalls(inner, (name, real) =>
        name.endsWith(".leave") ? (((call: never) => sleep(30).then(() => real(call))) as AnyCall) : real,
      ),
      timeoutMs: 300,
    };
    const prefix = uniquePrefix("sliver");
    const slots = semaphore({ client: slowLeaves, limit: 1, prefix });
    try {
      const holder = await slots.acquire("k");
      expect(holder).not.toBeNull();
      const waiting = slots.acquire("k", { waitMs: 50 });
      // Joined and listening for grants: no call of its own is out when the stall begins.
      const channel = `${storeKey(prefix, "semaphore", "k")}:ch`;
      await eventually(async () => ((await client.pubsub("NUMSUB", channel)) as [string, number])[1] === 1);
      // Past the wait's deadline by more than one store timeout: its leave gets 1 ms.
      stall(50 + 300 + 100);
      await expect(waiting).resolves.toBeNull();
      const health = await slots.health();
      expect(health.state, String(health.lastError?.message)).toBe("up");
      await holder?.release();
      // The waiter's leave reaches the store 30 ms after it was sent; until then the freed permit may be
      // granted to that waiter. Then the next caller is admitted.
      const admitted: unknown[] = [];
      await eventually(async () => {
        const next = await slots.acquire("k");
        if (next !== null) admitted.push(await next.release());
        return admitted.length > 0;
      }, 2_000);
    } finally {
      await slots.close();
      client.disconnect();
    }
  });
});
