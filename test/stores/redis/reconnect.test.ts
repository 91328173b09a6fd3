// A socket dropped in the turn its calls were made, and the reconnect's new
// socket, must not leave a command unsent (a hang) or a permit taken for nobody.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { redisStore, semaphore } from "../../../src/index.js";
import { newRedis } from "../../support/redis.js";
import { eventually } from "../../support/stores.js";

const settleAll = (ps: Promise<unknown>[]) =>
  Promise.allSettled(ps).then((all) => all.map((r) => (r.status === "fulfilled" ? r.value : r.reason)));

describe("corked writes and reconnects", () => {
  it("a socket destroyed in the turn it was corked: every call settles, later ones work", async () => {
    const client = newRedis();
    await client.ping();
    const slots = semaphore({ client: redisStore(client, { timeoutMs: 1_000 }), limit: 50, leaseMs: 10_000 });
    const id = randomUUID();
    for (let round = 0; round < 5; round++) {
      const pending = Array.from({ length: 10 }, () => slots.acquire(`${id}:${round}`));
      (client as unknown as { stream: { destroy(): void } }).stream.destroy();
      const outcomes = await settleAll(pending);
      for (const lease of outcomes) {
        if (lease !== null && typeof (lease as { release?: unknown }).release === "function") {
          await (lease as { release(): Promise<unknown> }).release().catch(() => {});
        }
      }
      await client.ping();
      await eventually(async () => {
        try {
          return (await slots.count(`${id}:${round}`)) === 0;
        } catch {
          return false;
        }
      }, 8_000);
    }
    // Corked in a nextTick/microtask chain after the uncork was queued.
    const chained = await new Promise<unknown[]>((resolve) => {
      const out: Promise<unknown>[] = [];
      out.push(slots.acquire(`${id}:x`));
      process.nextTick(() => {
        out.push(slots.acquire(`${id}:x`));
        queueMicrotask(() => {
          out.push(slots.acquire(`${id}:x`));
          process.nextTick(() => {
            out.push(slots.acquire(`${id}:x`));
            resolve(Promise.all(out));
          });
        });
      });
    });
    expect(chained.every((lease) => lease !== null)).toBe(true);
    expect(await slots.count(`${id}:x`)).toBe(4);
  }, 60_000);
});
