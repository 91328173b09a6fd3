import { describe, expect, it } from "vitest";
import { lock, memoryStore, type Store, semaphore } from "../../src/index.js";

// A failing reproduction, not picked up by vitest: to run it, copy it to a *.test.ts name
// (cp test/review/memory-wrapper.repro.ts test/review/x.test.ts && npx vitest run test/review/x.test.ts).
// A store wrapped with Object.create, the pattern the Redis store supports on purpose (its fields are
// not #private "so wrappers made with Object.create(store) keep working", and the tests wrap it so),
// fails on the embedded store: isMemoryStore() is `instanceof`, true for the wrapper, so the engine
// calls wrapper.takeNow(), whose #private fields reject the wrapper as receiver: a raw TypeError
// ("Receiver must be an instance of class MemoryStore"), not StoreUnavailableError, from every
// acquire. The wrapper's own overrides are bypassed too (the engine never calls its Store methods).
describe("the embedded store wrapped with Object.create", () => {
  it("acquires through the wrapper, and the wrapper's overrides are called", async () => {
    const inner = memoryStore();
    let acquires = 0;
    const wrapper: Store = Object.assign(Object.create(inner), {
      kind: "counted",
      semaphoreAcquire: (...args: Parameters<Store["semaphoreAcquire"]>) => {
        acquires++;
        return inner.semaphoreAcquire(...args);
      },
    });
    const slots = semaphore({ client: wrapper, limit: 1 });
    const lease = await slots.acquire("k");
    expect(lease).not.toBeNull();
    expect(acquires).toBe(1);
    // Methods it does not override are the embedded store's own, called on the wrapper.
    expect(await lease?.release()).toBe(true);
    const locks = lock({ client: Object.create(inner) as Store });
    expect(await locks.acquire("k", { waitMs: 100 })).not.toBeNull();
  });
});
