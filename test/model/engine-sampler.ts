// When the machine, not the program, held this process up. On a loaded machine the main thread
// can wait tens of milliseconds for a CPU while its timers are due: a lease may then lapse with
// no fault of the engine. A worker thread watches for that without touching the main thread's
// event loop (a timer or a message there would wake it, and hide what the engine model looks
// for): every 2 ms it reads how long the main thread has waited for a CPU so far (Linux's
// /proc/<pid>/task/<pid>/schedstat), and writes each wait it sees into shared memory. Where that
// file is missing, it records its own timers' lateness instead, a rougher sign of the same.
import { isMainThread, Worker } from "node:worker_threads";
import type { Span } from "./engine-faults.js";

const SLOTS = 4096;

const WORKER = `
const { workerData } = require("node:worker_threads");
const { readFileSync } = require("node:fs");
const spans = new Float64Array(workerData.spans);
const next = new Int32Array(workerData.next);
const seen = new Float64Array(workerData.seen);
// The main thread's id is the process id; a test running in a worker thread has another.
const file = workerData.main ? "/proc/" + workerData.pid + "/task/" + workerData.pid + "/schedstat" : "";
const now = () => performance.timeOrigin + performance.now();
const waited = () => {
  try {
    return Number(readFileSync(file, "utf8").split(" ")[1]) / 1e6;
  } catch {
    return undefined;
  }
};
const record = (from, to) => {
  const slot = Atomics.add(next, 0, 1) % ${SLOTS};
  spans[2 * slot] = from;
  spans[2 * slot + 1] = to;
};
let lastWaited = waited();
let last = now();
setInterval(() => {
  const at = now();
  const total = waited();
  if (total !== undefined && lastWaited !== undefined) {
    // The main thread was ready to run, and did not, for this long since the last look.
    if (total - lastWaited >= 1) record(at - (total - lastWaited), at);
  } else if (at - last > 7) record(last + 2, at);
  lastWaited = total;
  last = at;
  seen[0] = at;
}, 2);
`;

export class MachineSampler {
  readonly #spans = new Float64Array(new SharedArrayBuffer(SLOTS * 2 * 8));
  readonly #next = new Int32Array(new SharedArrayBuffer(4));
  /** When the worker last looked. */
  readonly #seen = new Float64Array(new SharedArrayBuffer(8));
  readonly #worker: Worker;

  constructor() {
    this.#worker = new Worker(WORKER, {
      eval: true,
      workerData: {
        spans: this.#spans.buffer,
        next: this.#next.buffer,
        seen: this.#seen.buffer,
        pid: process.pid,
        main: isMainThread,
      },
    });
    this.#worker.unref();
  }

  /** The waits seen since `since` (on this thread's `performance.now()` clock). */
  spans(since: number): Span[] {
    const origin = performance.timeOrigin;
    const count = Math.min(Atomics.load(this.#next, 0), SLOTS);
    const found: Span[] = [];
    for (let slot = 0; slot < count; slot++) {
      const from = (this.#spans[2 * slot] as number) - origin;
      const to = (this.#spans[2 * slot + 1] as number) - origin;
      if (to >= since)
        found.push({ from, to, what: `the machine kept this process from running for ${(to - from).toFixed(0)} ms` });
    }
    return found;
  }

  /**
   * Resolves once the worker has looked after `at`: every wait before it is then known. (The
   * worker, on the same starved machine, may be late too.) Gives up after `withinMs`.
   */
  async caughtUp(at: number, withinMs = 2000): Promise<void> {
    const bound = performance.now() + withinMs;
    while ((this.#seen[0] as number) - performance.timeOrigin < at && performance.now() < bound) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  stop(): Promise<number> {
    return this.#worker.terminate();
  }
}
