import { describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { eventually, mapCalls } from "../support/stores.js";

/**
 * A custom store over the embedded one, as a user may write (a store over their own service):
 * every call answers after `latencyMs`, and while `failing.on` every call fails as a refused
 * connection does. `timeoutMs` is whatever the user declared.
 */
function remoteLike(timeoutMs: unknown, latencyMs = 10) {
  const inner = memoryStore();
  const failing = { on: false };
  const calls = { inFlight: 0 };
  const remote = mapCalls(inner, (_, real) => async (call: never) => {
    calls.inFlight++;
    try {
      await new Promise((resolve) => setTimeout(resolve, latencyMs));
      if (failing.on) throw new Error("connect ECONNREFUSED 10.0.0.7:7000");
      return real(call);
    } finally {
      calls.inFlight--;
    }
  });
  const store = { ...remote, kind: "remote", timeoutMs };
  return { store: store as unknown as Store, failing, calls };
}

describe("the breaker's probe on a custom store", () => {
  // bounded() ignores a declared timeoutMs a timer cannot hold (Infinity, "5s", 0.5) and uses 2 s;
  // the probe used the raw value: setTimeout(Infinity) fires after 1 ms, before any answer.
  it.each([Number.POSITIVE_INFINITY, "5s", 0.5])(
    "brings the store back up once it answers (timeoutMs %s)",
    async (timeoutMs) => {
      const { store, failing, calls } = remoteLike(timeoutMs);
      const slots = semaphore({ client: store, limit: 2, prefix: "p" });
      expect(await slots.acquire("k")).not.toBeNull();
      failing.on = true;
      await expect(slots.acquire("k")).rejects.toThrow(/ECONNREFUSED/);
      expect((await slots.health()).state).toBe("down");
      // The failed acquire's clean-up (a leave) fails too; then nothing is in flight.
      await eventually(() => calls.inFlight === 0);
      expect((await slots.health()).state).toBe("down");
      failing.on = false;
      // The store answers again: the next probe (250 ms) sees it.
      await eventually(async () => (await slots.health()).state === "up", 5000, 20);
      expect(await slots.acquire("k")).not.toBeNull();
    },
    20_000,
  );
});
