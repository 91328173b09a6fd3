import { setTimeout as sleep } from "node:timers/promises";
import { copyDue } from "./copy-due.js";

/**
 * "abort" callbacks of calls waiting under one signal, kept in a Set behind a
 * single listener per signal. Most waits run under one long-lived signal (the
 * primitive's own, which aborts on `close()`), and a listener per wait on it
 * costs more than its add and remove: Node's EventTarget keeps listeners in a
 * linked list, and a removed listener keeps its links to its neighbours, so
 * once one removed listener has reached the old generation it holds the next
 * one, and that one's whole wait, alive through young-generation collections
 * (the same chain as in copy-due.ts).
 */
interface Waiting {
  callbacks: Set<() => void>;
  removed: number;
}

const bySignal = new WeakMap<AbortSignal, Waiting>();

/** Calls `callback` once when `signal` aborts, unless {@link offAbort} comes first. The signal must not have aborted yet. */
export function onAbort(signal: AbortSignal, callback: () => void): void {
  let waiting = bySignal.get(signal);
  if (waiting === undefined) {
    const made: Waiting = { callbacks: new Set(), removed: 0 };
    waiting = made;
    bySignal.set(signal, made);
    signal.addEventListener(
      "abort",
      () => {
        bySignal.delete(signal);
        for (const callback of [...made.callbacks]) callback();
      },
      { once: true },
    );
  }
  waiting.callbacks.add(callback);
}

/** Stops {@link onAbort}'s callback (no effect once it ran). */
export function offAbort(signal: AbortSignal, callback: () => void): void {
  const waiting = bySignal.get(signal);
  if (waiting === undefined || !waiting.callbacks.delete(callback)) return;
  if (copyDue(++waiting.removed, waiting.callbacks.size)) {
    waiting.removed = 0;
    waiting.callbacks = new Set(waiting.callbacks);
  }
}

/** Waits between attempts; an abort ends the wait at once with the signal's own reason. */
export async function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal === undefined ? undefined : { signal });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  }
}
