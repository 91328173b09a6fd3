// The HTTP adapters' refusals without a stack trace (issue #12): a refusal is an answer the adapter turns into a
// response, and capturing its stack was a third of a refused request's CPU. The engine made for the adapters
// (`semaphoreEngine`, `lockEngine`) builds its refusal errors without one, on both stores (over Redis the
// refusal is made after an await, where the adapter cannot reach it); `semaphore()` and `lock()` keep theirs.
import { describe, expect, it } from "vitest";
import { LockNotAcquiredError, lock, memoryStore, SemaphoreNotAcquiredError, semaphore } from "../../src/index.js";
import { lockEngine } from "../../src/lock/index.js";
import { semaphoreEngine } from "../../src/semaphore/index.js";
import type { Store } from "../../src/store/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

/** A stack trace has frames ("    at ...") after its first line; one captured with no frames has none. */
const frames = (error: unknown): number =>
  String((error as Error).stack ?? "")
    .split("\n")
    .filter((line) => line.startsWith("    at ")).length;

const stores: [string, () => Store | ReturnType<typeof newRedis>][] = [
  ["memory", () => memoryStore()],
  ["redis", () => newRedis()],
];

describe.each(stores)("refusals of the adapters' engine (%s)", (_name, client) => {
  it("semaphoreEngine refuses without a stack; semaphore() keeps it", async () => {
    const options = { client: client(), limit: 1, prefix: uniquePrefix("stack") };
    const held = await semaphore(options).acquire("id");
    expect(held).not.toBeNull();
    const quiet = await semaphoreEngine(options)
      .run("id", () => "ran")
      .catch((error: unknown) => error);
    expect(quiet).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect(frames(quiet)).toBe(0);
    const loud = await semaphore(options)
      .run("id", () => "ran")
      .catch((error: unknown) => error);
    expect(loud).toBeInstanceOf(SemaphoreNotAcquiredError);
    expect(frames(loud)).toBeGreaterThan(0);
    // The write is undone: an error made afterwards has its stack.
    expect(frames(new Error("after"))).toBeGreaterThan(0);
    await held?.release();
  });

  it("lockEngine refuses without a stack; lock() keeps it", async () => {
    const options = { client: client(), prefix: uniquePrefix("stack") };
    const held = await lock(options).acquire("id");
    expect(held).not.toBeNull();
    const quiet = await lockEngine(options)
      .run("id", () => "ran")
      .catch((error: unknown) => error);
    expect(quiet).toBeInstanceOf(LockNotAcquiredError);
    expect(frames(quiet)).toBe(0);
    const loud = await lock(options)
      .run("id", () => "ran")
      .catch((error: unknown) => error);
    expect(loud).toBeInstanceOf(LockNotAcquiredError);
    expect(frames(loud)).toBeGreaterThan(0);
    await held?.release();
  });
});
