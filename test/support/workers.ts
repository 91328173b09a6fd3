import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { eventually } from "./stores.js";

export interface WorkerEvent {
  event: string;
  label?: string;
  pid: number;
  t: string;
  [field: string]: unknown;
}

/** A worker process (test/support/worker.ts) and the events it has printed so far. */
export interface Worker {
  process: ChildProcess;
  events: WorkerEvent[];
  send(command: Record<string, unknown>): void;
  kill(signal?: NodeJS.Signals): void;
}

const all: Worker[] = [];

export async function startWorker(env: Record<string, string>): Promise<Worker> {
  const child = spawn(process.execPath, ["--import", "tsx", "test/support/worker.ts"], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const events: WorkerEvent[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => events.push(JSON.parse(line) as WorkerEvent));
  const worker: Worker = {
    process: child,
    events,
    send: (command) => child.stdin!.write(`${JSON.stringify(command)}\n`),
    kill: (signal = "SIGKILL") => child.kill(signal),
  };
  all.push(worker);
  await eventually(() => events.some((event) => event.event === "ready"), 20_000);
  return worker;
}

export function stopWorkers(): void {
  for (const worker of all.splice(0)) if (worker.process.exitCode === null) worker.process.kill("SIGKILL");
}

/** Every event of every worker, in hrtime order. */
export function timeline(workers: Worker[]): WorkerEvent[] {
  return workers
    .flatMap((worker) => worker.events)
    .sort((a, b) => (BigInt(a.t) < BigInt(b.t) ? -1 : BigInt(a.t) > BigInt(b.t) ? 1 : 0));
}
