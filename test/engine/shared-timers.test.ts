// A guard on the shared timers: `soon()` (src/runtime/timers.ts) arms its callbacks at the end of the
// turn and compacts the list of dropped ones in a long turn. Checked: a callback kept among hundreds
// dropped in the same turn still runs (a waiter's wake, a lease's renewal tick), none dropped runs,
// and one dropped after it was armed does not run either.
import { describe, expect, it } from "vitest";
import { SharedTimers } from "../../src/runtime/timers.js";
import { eventually } from "../support/stores.js";

describe("shared timers: soon()", () => {
  it("kept callbacks run, dropped ones never do, across compactions and after arming", async () => {
    const timers = new SharedTimers(true);
    const ran: number[] = [];
    const at = performance.now() + 20;
    const entries: ReturnType<SharedTimers["soon"]>[] = [];
    const kept = new Set<number>();
    for (let i = 0; i < 1_000; i++) {
      entries.push(timers.soon(at + (i % 7), () => ran.push(i)));
      kept.add(i);
      // Each drops its predecessor, but for every hundredth: the list is compacted several times in this turn.
      if (i > 0 && i % 100 !== 0) {
        timers.drop(entries[i - 1]);
        kept.delete(i - 1);
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
    // Armed now: dropping one of the kept afterwards must cancel it.
    timers.drop(entries[999]);
    kept.delete(999);
    await eventually(() => ran.length >= kept.size, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ran.sort((a, b) => a - b)).toEqual([...kept].sort((a, b) => a - b));
  });
});
