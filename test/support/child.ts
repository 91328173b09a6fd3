import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { eventually } from "./stores.js";

/** A child process running a TypeScript file: the JSON lines it printed, and how it ended. */
export interface Child {
  process: ChildProcess;
  events: Record<string, unknown>[];
  /** Resolves when it exits: its code, or the signal that ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The first event named `name`, waited for (a generous bound: a slow start is not what is under test). */
  next(name: string, withinMs?: number): Promise<Record<string, unknown>>;
}

const all: Child[] = [];

/** Starts `script` (under tsx) with `env` added; stdin is closed, so nothing of the parent's keeps it alive. */
export function spawnChild(script: string, env: Record<string, string>): Child {
  const child = spawn(process.execPath, ["--import", "tsx", script], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const events: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    try {
      events.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Not ours (a framework's log line).
    }
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const made: Child = {
    process: child,
    events,
    exited,
    async next(name, withinMs = 20_000) {
      await eventually(() => events.some((event) => event.event === name) || child.exitCode !== null, withinMs);
      const found = events.find((event) => event.event === name);
      if (found === undefined) throw new Error(`the child exited (${child.exitCode}) before "${name}"`);
      return found;
    },
  };
  all.push(made);
  return made;
}

/** Kills what a test left running (a failed one). */
export function killChildren(): void {
  for (const child of all.splice(0)) if (child.process.exitCode === null) child.process.kill("SIGKILL");
}

/** Resolves with how the child ended, or rejects if it is still running after `withinMs`. */
export async function exitOf(child: Child, withinMs = 15_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the child did not exit within ${withinMs} ms: something keeps it alive`)),
      withinMs,
    );
  });
  try {
    return await Promise.race([child.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}
