import { execFileSync } from "node:child_process";
import type { TestProject } from "vitest/node";
import { startRedisServer } from "./redis-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

/**
 * Gives every test a Redis: REDIS_URL when set, else a private redis-server on
 * a free port, stopped when the run ends. A missing binary fails at once with
 * the install command.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The Lua scripts are embedded into a generated module: never test stale ones.
  execFileSync(process.execPath, ["scripts/embed-lua.mjs"], { stdio: "inherit" });
  const given = process.env.REDIS_URL;
  if (given !== undefined && given !== "") {
    project.provide("redisUrl", given);
    return async () => {};
  }
  const server = await startRedisServer();
  project.provide("redisUrl", server.url);
  return () => server.stop();
}
