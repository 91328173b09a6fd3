import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { redisUrl } from "../support/redis.js";

const run = promisify(execFile);

it("the demo prints what the README says: 20 admitted and 5 shed, on memory and on Redis", async () => {
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/demo.ts"], {
    env: { ...process.env, REDIS_URL: redisUrl() },
  });
  expect(stdout).toContain(
    "embedded memory store\n  admitted 20, shed 5 (SemaphoreNotAcquiredError, at once)\n  peak in flight 20, holders afterwards 0",
  );
  expect(stdout).toMatch(/Redis at redis:\/\/\S+\n {2}admitted 20, shed 5 .*\n {2}peak in flight 20, holders afterwards 0/);
});
