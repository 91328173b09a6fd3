// A caller that aborts its acquire in the turn it made it, before it could see the answer, gets the
// abort's reason and holds nothing, on every store: the embedded store answers within the call, and it
// handed the lease over anyway while a Redis store's caller was refused (issue #27, found by the engine
// model: "actor 0 was handed a lease after its call was aborted"). A close() begun in that turn is
// heard the same way by a call that passed its own signal.

import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { describe, expect, it } from "vitest";
import { CHANNELS, lock, ShutdownError, semaphore } from "../../src/index.js";
import { uniquePrefix } from "../support/redis.js";
import { storesUnderTest } from "../support/stores.js";

describe.each(storesUnderTest)("an acquire aborted in the turn it was made, on the $name store", ({ make }) => {
  it("semaphore: rejects with the abort's reason, and its permit goes back", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix("abort-turn") });
    const controller = new AbortController();
    const reason = new Error("caller gave up");
    const pending = slots.acquire("k", { signal: controller.signal });
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(await slots.count("k")).toBe(0);
    // Nothing held: the next caller is admitted.
    const next = await slots.acquire("k");
    expect(next).not.toBeNull();
    await next?.release();
  });

  it("lock: rejects with the abort's reason, and the lock is free", async () => {
    const locks = lock({ client: make(), prefix: uniquePrefix("abort-turn-lock") });
    const controller = new AbortController();
    const pending = locks.acquire("k", { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    const next = await locks.acquire("k");
    expect(next).not.toBeNull();
    await next?.release();
  });

  it("aborted after the caller saw the lease: the lease stays held", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix("abort-after") });
    const controller = new AbortController();
    const lease = await slots.acquire("k", { signal: controller.signal });
    controller.abort();
    expect(lease).not.toBeNull();
    expect(lease?.signal.aborted).toBe(false);
    expect(await slots.count("k")).toBe(1);
    await lease?.release();
  });
});

describe.each(storesUnderTest)("an acquire with its own signal and close() begun in its turn, on the $name store", ({ make }) => {
  it("rejects with ShutdownError, and close() ends without waiting out its grace or reporting a loss", async () => {
    for (const factory of [
      semaphore({ client: make(), limit: 1, prefix: uniquePrefix("close-turn") }),
      lock({ client: make(), prefix: uniquePrefix("close-turn-lock") }),
    ]) {
      const lost: unknown[] = [];
      const onLost = (event: unknown) => lost.push(event);
      subscribe(CHANNELS.lost, onLost);
      try {
        const pending = factory.acquire("k", { signal: new AbortController().signal });
        const closed = factory.close({ graceMs: 60_000 });
        await expect(pending).rejects.toBeInstanceOf(ShutdownError);
        // A close waiting out its grace would not end within this test's timeout.
        await closed;
        expect(lost).toEqual([]);
      } finally {
        unsubscribe(CHANNELS.lost, onLost);
      }
    }
  });
});
