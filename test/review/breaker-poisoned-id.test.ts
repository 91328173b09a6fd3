import { describe, expect, it } from "vitest";
import { memoryStore, StoreUnavailableError, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { mapCalls } from "../support/stores.js";

// Found by review: a custom store that failed on ONE id with an error not shaped like a Redis reply
// (a TypeError from its own code) took the whole store down, and the probe, reading the id that
// failed, kept it down for good. Only errors that say the store could not be reached (network codes,
// the clients' delivery errors, our timeout, LOADING/BUSY/MASTERDOWN/CLUSTERDOWN) take it down now.
describe("a custom store whose calls on one id fail with a non-network error", () => {
  it("does not refuse every other id from then on", async () => {
    const inner = memoryStore();
    const custom = mapCalls(inner, (_, real) => async (call: never) => {
      // A bug in the custom store, reached only by this id's data.
      if ((call as { storeKey: string }).storeKey.includes("poisoned")) {
        throw new TypeError("Cannot read properties of undefined (reading 'limit')");
      }
      return real(call);
    });
    const store: Store = { ...custom, kind: "custom" };
    const slots = semaphore({ client: store, limit: 2, prefix: "p" });
    expect(await slots.acquire("fine")).not.toBeNull();
    await expect(slots.acquire("poisoned")).rejects.toBeInstanceOf(StoreUnavailableError);
    // The store answers every other id; over three seconds (several probes) they must be served.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await slots.health()).state).toBe("up");
    expect(await slots.acquire("fine")).not.toBeNull();
  }, 20_000);
});
