// extend() to a shorter lease re-arms the deadline watch when the store answers. When the store applies the extension but its answer does not come back
// in time (a stall, a dropped reply), extend() rejects and the holder kept the old, longer deadline:
// the server's shorter lease lapses, another caller takes the permit, and the first holder's signal
// has not been told. A shortening whose outcome is unknown must count as applied for the deadline.
import { describe, expect, it } from "vitest";
import { memoryStore, redisStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";
import { eventually } from "../support/stores.js";

describe("extend() to a shorter lease that the store applied without answering in time", () => {
  it("tells the holder through its signal before another caller can hold the permit", async () => {
    const mine = newRedis();
    const other = newRedis();
    const admin = newRedis();
    const prefix = uniquePrefix();
    try {
      const slots = semaphore(redisStore(mine, { timeoutMs: 100 }), { limit: 1, prefix });
      const rivals = semaphore(other, { limit: 1, prefix });
      const lease = await slots.acquire("k", { leaseMs: 60_000 });
      expect(lease).not.toBeNull();
      if (lease === null) return;
      const { signal } = lease;
      // Writes wait on the server until the pause ends; the extension is then applied, after the
      // caller's bound has run out.
      await admin.call("CLIENT", "PAUSE", "400", "WRITE");
      await expect(lease.extend(300)).rejects.toThrow();
      // The server's lease now ends 300 ms after the pause: wait until another caller holds the permit.
      let rival = null;
      await eventually(async () => {
        rival = await rivals.acquire("k");
        return rival !== null;
      });
      // A turn for the watch's timer: the holder's deadline passed well before (at least the pause).
      await new Promise((resolve) => setTimeout(resolve, 1));
      expect(signal.aborted).toBe(true);
      await (rival as { release(): Promise<boolean> } | null)?.release();
      await lease.release();
      await slots.close();
      await rivals.close();
    } finally {
      mine.disconnect();
      other.disconnect();
      admin.disconnect();
    }
  });
});

// Inside `run`, the lease is kept by the keeper (`kept`), which renews on a heartbeat grid
// and checks the deadline on its ticks; the deadline watch stands aside. A body that extends its
// lease to a shorter one moves the deadline sooner, but the keeper's next tick stays where it was
// (a third of the old lease away): the store's lease lapses, another caller holds the permit, and
// the body's signal has not been told. The keeper must look again at the sooner deadline.

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

describe("a body of run() that extends its lease to a shorter one", () => {
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
