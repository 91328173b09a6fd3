// The engine model's store faults: a wrapper over a real store (not a mock: every call that is
// not faulted reaches it) that refuses calls, delays them, or drops their answers while a fault
// window is open, and times every round trip, so that a store slowed by the machine itself
// (nothing the program injected) is known too.
import type { Store } from "../../src/store/index.js";
import { type AnyCall, mapCalls } from "../support/stores.js";
import type { FaultMode } from "./engine-program.js";

/** A span of time on the `performance.now()` clock, and what filled it. */
export interface Span {
  from: number;
  to: number;
  what: string;
}

interface Window {
  mode: FaultMode;
  from: number;
  to: number;
  delayMs: number;
}

/** Round trips longer than this, outside a fault, are the machine's own slowness. */
const SLOW_MS = 15;

export class FaultyStore {
  readonly store: Store;
  readonly #windows: Window[] = [];
  /** Delayed calls go out in the order they were made, as on one connection. */
  #chain: Promise<void> = Promise.resolve();
  #backlog = 0;

  /** `slow`: told of every round trip that took long while no fault was open. */
  constructor(
    inner: Store,
    timeoutMs: number,
    private readonly slow: (span: Span) => void,
  ) {
    const wrapped = mapCalls(inner, (name, real) => (call: never) => this.#call(name, real, call));
    this.store = { ...wrapped, kind: `faulty(${inner.kind})`, timeoutMs };
  }

  /** Opens a fault window from now; answers the span in which it may still affect calls. */
  inject(mode: FaultMode, ms: number, delayMs: number): Window {
    const from = performance.now();
    const window = { mode, from, to: from + ms, delayMs };
    this.#windows.push(window);
    return window;
  }

  #open(now: number): Window | undefined {
    for (const window of this.#windows) if (window.from <= now && now < window.to) return window;
    return undefined;
  }

  #call(name: string, real: AnyCall, call: never): Promise<unknown> {
    // Notifications of grants are best effort and backed up by timers: left alone.
    if (name === "watch") return real(call) as Promise<unknown>;
    const now = performance.now();
    const fault = this.#open(now);
    if (fault?.mode === "down") {
      return Promise.reject(Object.assign(new Error(`injected: store down (${name})`), { code: "ECONNRESET" }));
    }
    if (fault?.mode === "deaf") {
      // It reaches the store; its answer never comes back.
      Promise.resolve(real(call)).catch(() => {});
      return new Promise(() => {});
    }
    if (fault?.mode === "slow" || this.#backlog > 0) {
      const at = now + (fault?.mode === "slow" ? fault.delayMs : 0);
      this.#backlog++;
      const delivered = this.#chain.then(() => until(at));
      this.#chain = delivered;
      return delivered.then(() => {
        this.#backlog--;
        return real(call) as Promise<unknown>;
      });
    }
    // No fault: the call goes out at once, in the caller's turn (the store gathers a turn's calls).
    const answer = Promise.resolve(real(call));
    answer.then(
      () => this.#timed(name, now),
      () => this.#timed(name, now),
    );
    return answer;
  }

  #timed(name: string, sentAt: number): void {
    const now = performance.now();
    if (now - sentAt > SLOW_MS)
      this.slow({ from: sentAt, to: now, what: `store slow: ${name} took ${(now - sentAt).toFixed(0)} ms` });
  }
}

function until(at: number): Promise<void> {
  const ms = at - performance.now();
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
