// Review 5: a call added once every earlier call was answered must time out on its own deadline,
// even when it is given less than those earlier calls (a wait's last call, `spentMs`): the timer
// left armed for the earlier, later deadline must not be the one that bounds it.
import { describe, expect, it } from "vitest";
import { Deadlines } from "../../src/store/access/deadlines.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("store deadlines: a stale timer", () => {
  it("a shorter call added after the queue emptied times out on its own time", async () => {
    const deadlines = new Deadlines();
    const first = deadlines.add(performance.now() + 3_000, () => {});
    expect(deadlines.settle(first)).toBe(true);
    const addedAt = performance.now();
    let expiredAt = 0;
    deadlines.add(addedAt + 50, () => {
      expiredAt = performance.now();
    });
    await pause(1_000);
    expect(expiredAt).toBeGreaterThan(0);
    expect(expiredAt - addedAt).toBeLessThan(900);
  });
});
