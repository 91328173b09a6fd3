import { describe, expect, it } from "vitest";
import { lock, memoryStore, redisStore, semaphore, ValidationError } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis } from "../support/redis.js";

// Found by review (#13): a store is told apart by its two `acquire` calls alone (src/store/contract/shape.ts),
// so one missing the rest of the contract was taken, and failed only later, after a slot was taken.
// A wrapper without `semaphore.release` admitted, then could never give the permit back (each
// release a StoreUnavailableError: the permit held for its whole lease). One without `watch` (as a
// spread of redisStore() was, its watch on the prototype: see wrapper-close.test.ts) left waiters
// deaf to grants: a 1 s wait timed out with a permit freed for it at 50 ms. A store missing a call of the contract is now refused when the semaphore or
// lock is made, with a ValidationError that names the calls.
function refusal(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe("a store missing calls of the contract is refused at factory time", () => {
  it("a wrapper without semaphore.release", () => {
    const inner = memoryStore();
    const { release: _dropped, ...rest } = inner.semaphore;
    const wrapper = { kind: "partial", semaphore: rest, lock: inner.lock, watch: inner.watch } as unknown as Store;
    const error = refusal(() => semaphore({ client: wrapper, limit: 1 }));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).option).toBe("client");
    expect((error as Error).message).toContain("semaphore.release");
  });

  it("a wrapper without watch", () => {
    const inner = redisStore(newRedis());
    const wrapper = { kind: "no-watch", semaphore: inner.semaphore, lock: inner.lock } as unknown as Store;
    const error = refusal(() => lock({ client: wrapper }));
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toContain("watch");
  });

  it("complete stores and wrappers are still taken", () => {
    const inner = memoryStore();
    expect(() => semaphore({ client: { ...inner, kind: "spread" }, limit: 1 })).not.toThrow();
    expect(() => semaphore({ client: { ...redisStore(newRedis()), kind: "spread" }, limit: 1 })).not.toThrow();
    expect(() => lock({ client: Object.create(redisStore(newRedis())) as Store })).not.toThrow();
  });
});
