// review7: inside `run`, the lease is kept by the keeper (`kept`), which renews on a heartbeat grid
// and checks the deadline on its ticks; the deadline watch stands aside. A body that extends its
// lease to a shorter one moves the deadline sooner, but the keeper's next tick stays where it was
// (a third of the old lease away): the store's lease lapses, another caller holds the permit, and
// the body's signal has not been told. The keeper must look again at the sooner deadline.
import { describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

async function scenario(slots: ReturnType<typeof semaphore>, rivals: ReturnType<typeof semaphore>) {
  let toldInTime: boolean | undefined;
  const outcome = await slots
    .run(
      "k",
      async (lease) => {
        await lease.extend(200);
        let rival = null;
        await eventually(async () => {
          rival = await rivals.acquire("k");
          return rival !== null;
        });
        // A turn for timers: the body's deadline passed before the store's lease end.
        await new Promise((resolve) => setTimeout(resolve, 1));
        toldInTime = lease.signal.aborted;
        await (rival as { release(): Promise<boolean> } | null)?.release();
      },
      { leaseMs: 60_000 },
    )
    .then(
      () => "resolved",
      (error: Error) => error.name,
    );
  return { toldInTime, outcome };
}

describe("review7: a body of run() that extends its lease to a shorter one", () => {
  it("is told through its signal before another caller holds the permit (embedded store)", async () => {
    const store = memoryStore();
    const result = await scenario(semaphore(store, { limit: 1 }), semaphore(store, { limit: 1 }));
    expect(result.toldInTime).toBe(true);
  });

  it("is told through its signal before another caller holds the permit (Redis)", async () => {
    const mine = newRedis();
    const other = newRedis();
    const prefix = uniquePrefix();
    try {
      const result = await scenario(semaphore(mine, { limit: 1, prefix }), semaphore(other, { limit: 1, prefix }));
      expect(result.toldInTime).toBe(true);
    } finally {
      mine.disconnect();
      other.disconnect();
    }
  });
});
