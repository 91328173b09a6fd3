import { describe, expect, it } from "vitest";
import { memoryStore, type Store, StoreUnavailableError, semaphore } from "../../src/index.js";

// Found by review: a custom store that failed on ONE id with an error not shaped like a Redis reply
// (a TypeError from its own code) took the whole store down, and the probe, reading the id that
// failed, kept it down for good. Only errors that say the store could not be reached (network codes,
// the clients' delivery errors, our timeout, LOADING/BUSY/MASTERDOWN/CLUSTERDOWN) take it down now.
describe("a custom store whose calls on one id fail with a non-network error", () => {
  it("does not refuse every other id from then on", async () => {
    const inner = memoryStore();
    const store: Record<string, unknown> = { kind: "custom" };
    for (const method of Object.getOwnPropertyNames(Object.getPrototypeOf(inner))) {
      const real = (inner as unknown as Record<string, unknown>)[method];
      if (method === "constructor" || typeof real !== "function") continue;
      store[method] = async (key: string, ...rest: unknown[]) => {
        // A bug in the custom store, reached only by this id's data.
        if (key.includes("poisoned")) throw new TypeError("Cannot read properties of undefined (reading 'limit')");
        return (real as (...a: unknown[]) => unknown).call(inner, key, ...rest);
      };
    }
    const slots = semaphore({ client: store as unknown as Store, limit: 2, prefix: "p" });
    expect(await slots.acquire("fine")).not.toBeNull();
    await expect(slots.acquire("poisoned")).rejects.toBeInstanceOf(StoreUnavailableError);
    // The store answers every other id; over three seconds (several probes) they must be served.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await slots.health()).state).toBe("up");
    expect(await slots.acquire("fine")).not.toBeNull();
  }, 20_000);
});
