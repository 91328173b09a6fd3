import { describe, expect, it } from "vitest";
import { memoryStore, type Store, StoreUnavailableError, semaphore } from "../../src/index.js";

// A failing reproduction, not picked up by vitest: to run it, copy it to a *.test.ts name.
// A custom store that fails on ONE id with an error that is not shaped like a Redis reply (here a
// TypeError from its own code; a DynamoDB-backed store's "ValidationException" is the same) takes the
// whole store down: src/breaker.ts's unreachable() calls every such error "could not reach the store".
// Then the probe reads "the last id a caller used" -- the id that failed, since admit() records it
// before the call and nothing is admitted while down -- so every probe fails the same way and the
// store stays down for good: every other id is refused at once, although each would be served.
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
