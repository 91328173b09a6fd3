// The one timer per store that bounds every round trip (src/store/access/deadlines.ts): each call times out
// once its own deadline has passed, never one answered first, and an answer after the timeout is not
// heard. Ordering and counts only; the margins are wide (two shared cores).
import { describe, expect, it } from "vitest";
import { Deadlines } from "../src/store/access/deadlines.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("store deadlines", () => {
  it("times out the calls still out, in order, and not those answered", async () => {
    const deadlines = new Deadlines();
    const expired: string[] = [];
    const now = performance.now();
    const a = deadlines.add(now + 30, () => expired.push("a"));
    const b = deadlines.add(now + 30, () => expired.push("b"));
    const c = deadlines.add(now + 60, () => expired.push("c"));
    // b answers; then a second call of the same deadline as c.
    expect(deadlines.settle(b)).toBe(true);
    const d = deadlines.add(now + 60, () => expired.push("d"));
    expect(deadlines.settle(d)).toBe(true);
    await pause(400);
    expect(expired).toEqual(["a", "c"]);
    // Timed out first: their answers are not heard, and nothing is heard twice.
    expect(deadlines.settle(a)).toBe(false);
    expect(deadlines.settle(c)).toBe(false);
    expect(deadlines.settle(b)).toBe(false);
  });

  it("a call given less than the others (out of deadline order) times out on its own time", async () => {
    const deadlines = new Deadlines();
    const expired: string[] = [];
    const now = performance.now();
    const long = deadlines.add(now + 5_000, () => expired.push("long"));
    const short = deadlines.add(now + 20, () => expired.push("short"));
    const answered = deadlines.add(now + 20, () => expired.push("answered"));
    expect(deadlines.settle(answered)).toBe(true);
    await pause(400);
    expect(expired).toEqual(["short"]);
    expect(deadlines.settle(short)).toBe(false);
    expect(deadlines.settle(long)).toBe(true);
  });

  it("a call added after the others were answered gets its whole bound, from when it was added", async () => {
    const deadlines = new Deadlines();
    const expired: number[] = [];
    const first = deadlines.add(performance.now() + 100, () => expired.push(1));
    deadlines.settle(first);
    await pause(50);
    // The timer armed for the first call fires before this one is due, and must wait for it.
    const addedAt = performance.now();
    let expiredAt = 0;
    deadlines.add(addedAt + 300, () => {
      expiredAt = performance.now();
      expired.push(2);
    });
    await pause(1_000);
    expect(expired).toEqual([2]);
    expect(expiredAt - addedAt).toBeGreaterThanOrEqual(299);
  });

  it("thousands answered in order past one still out: only the one still out times out", async () => {
    const deadlines = new Deadlines();
    const expired: number[] = [];
    const at = performance.now() + 50;
    // More than the queue keeps before it cuts down its answered head.
    const answered = Array.from({ length: 3_000 }, (_, i) => deadlines.add(at, () => expired.push(i)));
    const last = deadlines.add(at + 1, () => expired.push(-1));
    for (const entry of answered) expect(deadlines.settle(entry)).toBe(true);
    await pause(500);
    expect(expired).toEqual([-1]);
    expect(deadlines.settle(last)).toBe(false);
    expect(deadlines.settle(answered[0] as never)).toBe(false);
  });
});
