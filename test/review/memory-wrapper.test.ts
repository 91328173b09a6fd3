import { describe, expect, it } from "vitest";
import { lock, memoryStore, semaphore } from "../../src/index.js";
import type { SemaphoreAcquireCall, Store } from "../../src/store/index.js";

// Found by review: a store wrapped with Object.create, the pattern the Redis store supports on purpose,
// failed on the embedded store. isMemoryStore() was `instanceof`, true for the wrapper, so the engine
// called the wrapper's synchronous cores, whose #private fields reject it as receiver (a raw TypeError
// from every acquire), and the wrapper's own overrides were bypassed. Now only the store itself takes
// the in-process path; a wrapper goes through its Store methods, bound to the store.
describe("the embedded store wrapped with Object.create", () => {
  it("acquires through the wrapper, and the wrapper's overrides are called", async () => {
    const inner = memoryStore();
    let acquires = 0;
    const wrapper: Store = Object.assign(Object.create(inner), {
      kind: "counted",
      semaphore: {
        ...inner.semaphore,
        acquire: (call: SemaphoreAcquireCall) => {
          acquires++;
          return inner.semaphore.acquire(call);
        },
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
