import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

/** One step of one caller, as a load worker logged it. */
export interface HistoryEvent {
  e: "ready" | "enter" | "exit" | "lost" | "released" | "run-lost" | "error" | "finished";
  pid: number;
  t: bigint;
  tok?: string;
  code?: string;
  /** On `enter`: the permits held and the limit the call passed (absent: 1 and the scenario's limit). */
  w?: number;
  l?: number;
  /** On `enter`: when the call was made (hrtime), before the store admitted it. */
  sent?: bigint;
}

export interface LoadProcess {
  child: ChildProcess;
  events: HistoryEvent[];
  finished: Promise<void>;
  /** hrtime at which the test killed or stopped it, if it did. */
  killedAt?: bigint;
}

/** Starts a load worker (load-worker.ts, or another worker that logs the same way) with the given settings. */
export function startLoad(env: Record<string, string | number>, worker = "test/faults/load-worker.ts"): LoadProcess {
  const child = spawn(process.execPath, ["--import", "tsx", worker], {
    env: { ...process.env, ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const events: HistoryEvent[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const { t, sent, ...raw } = JSON.parse(line) as Omit<HistoryEvent, "t" | "sent"> & { t: string; sent?: string };
    events.push({ ...raw, t: BigInt(t), ...(sent === undefined ? {} : { sent: BigInt(sent) }) });
  });
  running.add(child);
  const finished = new Promise<void>((resolve) =>
    child.once("exit", () => {
      running.delete(child);
      resolve();
    }),
  );
  return { child, events, finished };
}

// Load processes still running: a scenario that failed leaves its processes retrying against a
// server it stopped, and they would keep the test run from exiting.
const running = new Set<ChildProcess>();

/** Kills every load process still running (a scenario's clean-up). */
export function stopLoads(): void {
  for (const child of running) child.kill("SIGKILL");
}

/** The checker's verdict on one history. */
export interface Verdict {
  operations: number;
  maxHolders: number;
  declaredLosses: number;
  /** Instants with more holders than the limit that no declared loss explains. */
  unexplained: number;
  errors: number;
  problems: string[];
}

/**
 * Sweeps the merged history of every process. A holder is inside from its
 * `enter` to its `exit` (or, if its process was killed, to the kill). At any
 * instant the permits of the holders *not* told of a loss must fit within
 * the largest limit among them: over-admission is allowed only where its
 * holder was told (the signal aborted, or `run` rejected with the LeaseLost
 * error). Why the largest: of the holders inside at an instant, the one
 * admitted last was admitted while all the others held, so their permits,
 * its own included, fitted its limit. With one limit for all, that is the
 * plain rule "at most `limit` permits held".
 *
 * And per admission, the sharper rule each caller's own limit implies: the
 * holders that entered before a call was made, and were still inside when
 * it entered, were admitted before it and held when it was admitted, so
 * their permits and its own must fit within its limit.
 */
export function check(processes: LoadProcess[], limit: number): Verdict {
  const lost = new Set<string>();
  const shape = new Map<string, { w: number; l: number; sent: bigint | undefined; t: bigint }>();
  const steps: { t: bigint; tok: string; delta: 1 | -1 }[] = [];
  let operations = 0;
  let errors = 0;
  for (const process of processes) {
    const open = new Set<string>();
    for (const event of process.events) {
      if (event.e === "lost" || event.e === "run-lost") {
        if (event.tok !== undefined) lost.add(event.tok);
      }
      if (event.e === "error") errors++;
      if (event.tok === undefined) continue;
      if (event.e === "enter") {
        operations++;
        shape.set(event.tok, { w: event.w ?? 1, l: event.l ?? limit, sent: event.sent, t: event.t });
        open.add(event.tok);
        steps.push({ t: event.t, tok: event.tok, delta: 1 });
      } else if (event.e === "exit" && open.delete(event.tok)) {
        steps.push({ t: event.t, tok: event.tok, delta: -1 });
      }
    }
    // A killed process stops working at once; its leases lapse on the server on their own.
    for (const tok of open) steps.push({ t: process.killedAt ?? BigInt(Number.MAX_SAFE_INTEGER) * 1_000_000n, tok, delta: -1 });
  }
  steps.sort((a, b) => (a.t < b.t ? -1 : a.t > b.t ? 1 : a.delta - b.delta));
  const inside = new Set<string>();
  let maxHolders = 0;
  let unexplained = 0;
  const problems: string[] = [];
  for (const step of steps) {
    if (step.delta === 1) {
      const entering = shape.get(step.tok);
      if (entering?.sent !== undefined && !lost.has(step.tok)) {
        let before = entering.w;
        for (const tok of inside) {
          const other = shape.get(tok);
          if (other !== undefined && !lost.has(tok) && other.t < entering.sent) before += other.w;
        }
        if (before > entering.l) {
          unexplained++;
          if (problems.length < 5)
            problems.push(`${step.tok} admitted with ${before} permits held under its limit ${entering.l}`);
        }
      }
      inside.add(step.tok);
    } else inside.delete(step.tok);
    maxHolders = Math.max(maxHolders, inside.size);
    let permits = 0;
    let bound = 0;
    for (const tok of inside) {
      if (lost.has(tok)) continue;
      const { w, l } = shape.get(tok) ?? { w: 1, l: limit };
      permits += w;
      bound = Math.max(bound, l);
    }
    if (permits > bound) {
      unexplained++;
      if (problems.length < 5)
        problems.push(`${permits} permits held by holders not told of a loss at t=${step.t} (limit ${bound})`);
    }
  }
  return { operations, maxHolders, declaredLosses: lost.size, unexplained, errors, problems };
}
