// A process whose event loop has nothing else to do: the keeper's timers alone must keep a short
// lease renewed (see test/stores/contract/keeper.test.ts, issue #27 defect 1). Prints one JSON line per
// primitive: whether a second caller got in while the first worked, and how `run` ended.
import { lock, memoryStore, semaphore } from "../../src/index.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Any earlier run with the default lease, on any store: the state the defect needed.
await semaphore(memoryStore(), { limit: 1 }).run("warm", () => sleep(50));

const slots = semaphore(memoryStore(), { limit: 1 });
const locks = lock(memoryStore());
for (const [name, run, second] of [
  ["semaphore", (body: () => Promise<void>) => slots.run("b", body, { leaseMs: 300 }), () => slots.acquire("b")],
  ["lock", (body: () => Promise<void>) => locks.run("b", body, { ttlMs: 300 }), () => locks.acquire("b")],
] as const) {
  let secondGotIn = false;
  let outcome = "resolved";
  try {
    await run(async () => {
      await sleep(600);
      const other = await second();
      secondGotIn = other !== null;
      await other?.release();
      await sleep(300);
    });
  } catch (error) {
    outcome = (error as { code?: string }).code ?? String(error);
  }
  console.log(JSON.stringify({ event: name, secondGotIn, outcome }));
}
