// The adapter model's monitor (see adapter.test.ts): what each request's handler and stream
// callback are doing, what leasehold said about its lease, and the checks over both.
import type { Form, Program } from "./adapter-program.js";

/** One request as the monitor sees it. */
class Seen {
  token: string | undefined;
  /** Handler and stream callback currently working (entered, not settled). */
  units = 0;
  /** The handler gave its permit back itself (`lease.release()`): its work no longer counts. */
  selfReleased = false;
  lost: Error | undefined;
  released = 0;
  /** The client went away before its response was complete. */
  clientLeft = false;
  /** An operator freed its lease. */
  stolen = false;
  /** Behind a `timeout()`: the guard cannot see its handler's end (it timed out, or failed through the timeout). */
  unseen = false;
}

export class AdapterMonitor {
  readonly violations: string[] = [];
  readonly log: string[] = [];
  readonly #requests: Seen[];
  readonly #byToken = new Map<string, Seen>();
  readonly #acquired = new Set<string>();
  readonly #released = new Map<string, number>();
  readonly #started = performance.now();
  readonly #limit: number;
  readonly #form: Form;
  readonly #program: Program;
  #shutdown = false;

  constructor(program: Program) {
    this.#requests = program.requests.map(() => new Seen());
    this.#limit = program.limit;
    this.#form = program.form;
    this.#program = program;
  }

  #note(line: string): void {
    this.log.push(`${(performance.now() - this.#started).toFixed(0).padStart(5)} ms  ${line}`);
  }

  #violate(line: string): void {
    this.#note(`VIOLATION: ${line}`);
    this.violations.push(line);
  }

  /** Requests whose handler or stream callback works under a permit they still hold, as far as leasehold has said. */
  #holding(): number[] {
    const holding: number[] = [];
    this.#requests.forEach((seen, index) => {
      // A lease an operator freed is free in the store from then: another may be admitted before its holder hears.
      if (seen.units > 0 && !seen.selfReleased && !seen.stolen && seen.lost === undefined && seen.released === 0) {
        holding.push(index);
      }
    });
    return holding;
  }

  /** The handler (or a stream callback) of request `req`, holding the lease `token`, starts working. */
  enter(req: number, token: string | undefined, what: string): void {
    const seen = this.#requests[req] as Seen;
    if (token !== undefined && seen.token === undefined) {
      seen.token = token;
      this.#byToken.set(token, seen);
      // Its release may have been told before its handler ran (memory store: in the same call).
      const released = this.#released.get(token) ?? 0;
      seen.released = released;
    }
    seen.units++;
    this.#note(`#${req} ${what} starts`);
    if (token === undefined) this.#violate(`#${req}'s ${what} runs without a lease`);
    const holding = this.#holding();
    if (holding.length > this.#limit) {
      this.#violate(
        `${holding.length} handlers or stream callbacks work at once under the limit ${this.#limit}: ${holding.map((r) => `#${r}`).join(", ")}`,
      );
    }
  }

  exit(req: number, what: string): void {
    const seen = this.#requests[req] as Seen;
    seen.units--;
    this.#note(`#${req} ${what} settles`);
  }

  /** Request `req`'s handler, behind a `timeout()`, timed out or failed: the guard cannot see its end. */
  unseen(req: number): void {
    (this.#requests[req] as Seen).unseen = true;
    this.#note(`#${req}'s end is hidden from the guard (behind its timeout)`);
  }

  selfRelease(req: number): void {
    (this.#requests[req] as Seen).selfReleased = true;
    this.#note(`#${req} releases its lease itself`);
  }

  clientLeft(req: number): void {
    (this.#requests[req] as Seen).clientLeft = true;
    this.#note(`#${req}'s client leaves`);
  }

  /**
   * An operator is about to free a lease: the `nth` (modulo their number) of those held now by a
   * request whose handler has started; undefined when none is.
   */
  steal(nth: number): string | undefined {
    const held = this.#requests.filter((seen) => seen.token !== undefined && seen.released === 0 && seen.lost === undefined);
    const seen = held[nth % Math.max(held.length, 1)];
    if (seen === undefined) return undefined;
    seen.stolen = true;
    this.#note(`an operator frees #${this.#requests.indexOf(seen)}'s lease`);
    return seen.token;
  }

  shutdown(): void {
    this.#shutdown = true;
    this.#note("shutdown");
  }

  note(line: string): void {
    this.#note(line);
  }

  acquired(token: string): void {
    this.#acquired.add(token);
    this.#note(`acquired ${token.slice(0, 8)}`);
  }

  released(token: string, ours: boolean): void {
    const times = (this.#released.get(token) ?? 0) + 1;
    this.#released.set(token, times);
    const seen = this.#byToken.get(token);
    const who = seen === undefined ? token.slice(0, 8) : `#${this.#requests.indexOf(seen)}`;
    this.#note(`released ${who}${ours ? "" : " (not ours)"}`);
    if (times > 1) this.#violate(`${who}'s lease released ${times} times`);
    if (seen === undefined) return;
    seen.released = times;
    if (seen.units > 0 && !seen.selfReleased && seen.lost === undefined) {
      this.#violate(`${who}'s permit was given back while its handler or stream callback still works, and no loss was reported`);
    }
  }

  lost(token: string, error: Error): void {
    const seen = this.#byToken.get(token);
    const who = seen === undefined ? token.slice(0, 8) : `#${this.#requests.indexOf(seen)}`;
    const cause = error.cause as Error | undefined;
    this.#note(`lost ${who}: ${error.message}${cause === undefined ? "" : ` (cause: ${cause.name}: ${cause.message})`}`);
    if (seen === undefined) {
      this.#violate(`a lease no handler held (${token.slice(0, 8)}) was reported lost`);
      return;
    }
    seen.lost = error;
    if (seen.stolen) return;
    // The message words the fix by the cause: an operator's release only when there was one.
    if (/no longer this holder's/.test(error.message)) {
      this.#violate(`${who}'s loss is told as the store's (an operator's release), but no operator freed it: ${error.message}`);
    }
    const working = seen.units > 0;
    // Nobody reads a HEAD response's body: Hono tells a stream's callback as it would a client that left.
    if (working && (seen.clientLeft || this.#program.requests[this.#requests.indexOf(seen)]?.head === true)) return;
    if (working && this.#shutdown) return;
    // A middleware between guard and handler answered an error (the timeout's 504, or the handler's own
    // failure passed on): the guard cannot see the handler's end, keeps the permit (to the grace, or a
    // shutdown's), then reports it lost (docs/adapters.md: which form sees the handler's end).
    if (this.#form === "hono-timeout" && seen.unseen) return;
    this.#violate(
      `${who}'s lease was reported lost without a cause the program injected (${error.message}${
        cause === undefined ? "" : `; cause ${cause.name}: ${cause.message}`
      }; client ${seen.clientLeft ? "left" : "stayed"}, work ${working ? "running" : "over"})`,
    );
  }

  /** Every handler and callback has settled. */
  get idle(): boolean {
    return this.#requests.every((seen) => seen.units === 0);
  }

  /** Every lease acquired has been released (once: more is a violation of its own). */
  get allReleased(): boolean {
    for (const token of this.#acquired) if ((this.#released.get(token) ?? 0) === 0) return false;
    return true;
  }

  /** The end of a program: what was acquired and never released. */
  unreleased(): string[] {
    return [...this.#acquired].filter((token) => (this.#released.get(token) ?? 0) === 0);
  }

  fail(line: string): void {
    this.#violate(line);
  }
}
