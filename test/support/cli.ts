import { spawn } from "node:child_process";

/** The `leasehold` command, run from its source (no build needed). */
export const COMMAND = [process.execPath, "--import", "tsx", "src/cli/main.ts"] as const;

/** How a run of the command ended. */
export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the command to its end, stdin closed (not a terminal), without the caller's REDIS_URL unless `env` gives one. */
export function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(COMMAND[0], [...COMMAND.slice(1), ...args], {
      env: { ...process.env, REDIS_URL: undefined, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}
