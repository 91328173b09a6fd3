// leasehold release --token with values a careless script may pass: an empty token would match
// every token as a prefix, so it is a usage error and releases nothing.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { semaphore } from "../../src/index.js";
import { newRedis, redisUrl, uniquePrefix } from "../support/redis.js";

const COMMAND = [process.execPath, "--import", "tsx", "src/cli/main.ts"] as const;

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(COMMAND[0], [...COMMAND.slice(1), ...args], {
      env: { ...process.env, REDIS_URL: undefined },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => {
      stdout += c;
    });
    child.stderr.on("data", (c) => {
      stderr += c;
    });
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("leasehold release --token, odd values", { timeout: 60_000 }, () => {
  it("an empty --token is a usage error, and releases nothing (it is a prefix of every token)", async () => {
    const prefix = uniquePrefix("cli");
    const slots = semaphore(newRedis(), { limit: 3, prefix });
    const only = await slots.acquire("k", { tenant: "acme", tenantLimit: 2, weight: 2 });
    const ran = await cli(["release", "k", "--token", "", "--prefix", prefix, "--url", redisUrl()]);
    expect(ran.code).toBe(2);
    expect(ran.stderr).toMatch(/--token/);
    expect(await slots.stats("k")).toMatchObject({ used: 2 });
    // and the real token frees it, tenant counts included
    const freed = await cli(["release", "k", "--token", only?.token as string, "--prefix", prefix, "--url", redisUrl()]);
    expect(freed.code).toBe(0);
    expect(await slots.stats("k", { tenant: "acme", tenantLimit: 2 })).toMatchObject({ used: 0 });
    expect(await slots.stats("k")).toMatchObject({ used: 0, tenants: 0 });
    await slots.close();
  });
});
