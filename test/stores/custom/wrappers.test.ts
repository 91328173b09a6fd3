import { describe, expect, it } from "vitest";
import { lock, memoryStore, StoreUnavailableError, semaphore } from "../../../src/index.js";
import type { SemaphoreAcquireCall, Store } from "../../../src/store/index.js";

// A store wrapped with Object.create, the pattern the Redis store supports on purpose,
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

// Issue #13: `timeoutMs: 0` on the contract turns the engine's bound off for any store
// that declares it, and the embedded store declares it as an own field. A wrapper built the way the
// docs show ({ ...store.semaphore, acquire }), by spreading the store or with Object.create(store),
// inherits the 0, and a call its override never answers hangs for good: `waitMs` does not bound it,
// nor does close() (it waits for the acquisition). Only the embedded store itself goes without a
// timer; any other store is bounded by its timeoutMs or 2000 ms.
const never = (): Promise<never> => new Promise(() => {});

/** Settles with the outcome of `pending`, or "hung" after `ms`. */
function within(pending: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise((resolve) => {
    timer = setTimeout(() => resolve("hung"), ms);
  });
  return Promise.race([
    pending.then(
      (value) => value,
      (error: unknown) => error,
    ),
    hung,
  ]).finally(() => clearTimeout(timer));
}

function wrappers(): { name: string; make: () => Store }[] {
  return [
    {
      name: "a spread of the store",
      make: () => {
        const inner = memoryStore();
        return {
          ...inner,
          kind: "audited",
          semaphore: { ...inner.semaphore, acquire: never },
          lock: { ...inner.lock, acquire: never },
        };
      },
    },
    {
      name: "Object.create(store)",
      make: () => {
        const inner = memoryStore();
        return Object.assign(Object.create(inner) as Store, {
          kind: "audited",
          semaphore: { ...inner.semaphore, acquire: never },
          lock: { ...inner.lock, acquire: never },
        });
      },
    },
    ...[0, -1, Number.NaN].map((timeoutMs) => ({
      name: `a custom store declaring timeoutMs ${timeoutMs}`,
      make: (): Store => {
        const inner = memoryStore();
        return {
          kind: "custom",
          timeoutMs,
          semaphore: { ...inner.semaphore, acquire: never },
          lock: { ...inner.lock, acquire: never },
          watch: (call) => inner.watch(call),
        };
      },
    })),
  ];
}

describe.each(wrappers())("a wrapper of the embedded store that never answers ($name)", ({ make }) => {
  it("a semaphore's acquire fails with StoreUnavailableError within the default bound", async () => {
    const slots = semaphore({ client: make(), limit: 2 });
    const outcome = await within(slots.acquire("k", { waitMs: 100 }), 4_000);
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
  });

  it("a lock's acquire fails with StoreUnavailableError within the default bound", async () => {
    const locks = lock({ client: make() });
    const outcome = await within(locks.acquire("k"), 4_000);
    expect(outcome).toBeInstanceOf(StoreUnavailableError);
  });
});
