// Type-level tests, checked by `tsc --noEmit` inside `npm test`: each option list names every option
// of its interface (the lists' `satisfies` already refuses a name the interface lacks), so an option
// added to an interface but not to its list fails here instead of being refused at run time as unknown.
// At run time they check what the lists refuse.
import { describe, expect, expectTypeOf, it } from "vitest";
import { lock, semaphore, ValidationError } from "../../src/index.js";
import type { LockAcquireOptions, LockOptions, LockRunOptions } from "../../src/lock/types.js";
import {
  type CLOSE_OPTIONS,
  type ENGINE_OPTIONS,
  LOCK_ACQUIRE_OPTIONS,
  LOCK_FACTORY_OPTIONS,
  LOCK_RUN_OPTIONS,
  SEMAPHORE_ACQUIRE_OPTIONS,
  SEMAPHORE_FACTORY_OPTIONS,
  SEMAPHORE_RUN_OPTIONS,
} from "../../src/options/lists.js";
import type { CloseOptions } from "../../src/options/types.js";
import type { SemaphoreAcquireOptions, SemaphoreOptions, SemaphoreRunOptions } from "../../src/semaphore/types.js";

type Named<List extends readonly string[]> = List[number];

describe("option lists", () => {
  it("name every option of their interface, and nothing else", () => {
    expectTypeOf<Named<typeof SEMAPHORE_FACTORY_OPTIONS>>().toEqualTypeOf<keyof SemaphoreOptions>();
    expectTypeOf<Named<typeof SEMAPHORE_ACQUIRE_OPTIONS>>().toEqualTypeOf<keyof SemaphoreAcquireOptions>();
    expectTypeOf<Named<typeof SEMAPHORE_RUN_OPTIONS>>().toEqualTypeOf<keyof SemaphoreRunOptions>();
    expectTypeOf<Named<typeof LOCK_FACTORY_OPTIONS>>().toEqualTypeOf<keyof LockOptions>();
    expectTypeOf<Named<typeof LOCK_ACQUIRE_OPTIONS>>().toEqualTypeOf<keyof LockAcquireOptions>();
    expectTypeOf<Named<typeof LOCK_RUN_OPTIONS>>().toEqualTypeOf<keyof LockRunOptions>();
    expectTypeOf<Named<typeof CLOSE_OPTIONS>>().toEqualTypeOf<keyof CloseOptions>();
  });

  it("share with the HTTP side every factory option a semaphore and a lock both take, but the owner", () => {
    expectTypeOf<Named<typeof ENGINE_OPTIONS>>().toEqualTypeOf<Exclude<keyof SemaphoreOptions & keyof LockOptions, "owner">>();
  });

  it("hold no name twice", () => {
    for (const list of [
      SEMAPHORE_FACTORY_OPTIONS,
      SEMAPHORE_ACQUIRE_OPTIONS,
      SEMAPHORE_RUN_OPTIONS,
      LOCK_FACTORY_OPTIONS,
      LOCK_ACQUIRE_OPTIONS,
      LOCK_RUN_OPTIONS,
    ]) {
      expect(new Set(list).size).toBe(list.length);
    }
  });

  it("refuse an option of the other primitive, with a ValidationError naming it", () => {
    expect(() => lock({ limit: 2 } as never)).toThrow(ValidationError);
    expect(() => semaphore({ limit: 2, ttlMs: 1000 } as never)).toThrow(/unknown option `ttlMs` for semaphore/);
    const slots = semaphore({ limit: 2 });
    return expect(slots.acquire("x", { heartbeatMs: 10 } as never)).rejects.toThrow(/unknown option `heartbeatMs`/);
  });
});
