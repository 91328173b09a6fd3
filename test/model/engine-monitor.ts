// The engine model's monitor: what every lease went through, the causes the program injected (and
// the pauses the machine added), and the invariants of engine.test.ts checked against them.
import type { Holder, Lease, LostEvent, ReleasedEvent } from "../../src/index.js";
import {
  LockLeaseLostError,
  LockNotAcquiredError,
  SemaphoreLeaseLostError,
  SemaphoreNotAcquiredError,
  ShutdownError,
  StoreUnavailableError,
} from "../../src/index.js";
import type { Span } from "./engine-faults.js";
import { type ActorSpec, effectiveHeartbeat, type Factory } from "./engine-program.js";

/** The error a body throws when told `throw`. */
export class BodyFailure extends Error {
  constructor(readonly actor: number) {
    super(`body of actor ${actor} failed on purpose`);
  }
}

/** The reason an `abort` action aborts a call's own signal with. */
export class ProgramAbort extends Error {
  constructor(readonly actor: number) {
    super(`the program aborted actor ${actor}'s call`);
  }
}

/** Everything one lease went through, on the `performance.now()` clock. */
export interface LeaseRecord {
  actor: number;
  spec: ActorSpec;
  token: string;
  lease: Lease;
  grantedAt: number;
  /**
   * The acquire and every extend the store accepted, in the order answered: the call's time
   * (never later than the engine's send), its length, and when the answer came. Where nothing
   * else renews the lease, it lapses no sooner than the last one's `calledAt + ms`.
   */
  confirmed: { calledAt: number; ms: number; answeredAt: number }[];
  /** The holder's own releases (an `acquire` lease's, or a body's early one), and their answers. */
  releases: { calledAt: number; answer?: boolean | "failed" }[];
  bodyEndedAt?: number;
  /** The engine's deadline when the body ended. */
  deadlineAtBodyEnd?: number;
  /** The signal aborted with a LeaseLost error. */
  toldAt?: number;
  toldError?: unknown;
  /** The signal aborted with a ShutdownError (its factory is closing). */
  interruptedAt?: number;
  /** The `lost` event. */
  lostAt?: number;
  lostError?: Error;
  /** The first `released` event. */
  released?: { at: number; ours: boolean };
  /** Why this lease, lapsed by the engine's own deadline, was excused as over the limit: it must be told of its loss. */
  mustBeTold?: string;
}

/** How far apart two moments may be for timers that fire late on a loaded machine. */
const LATE_MS = 60;
/** How far apart the engine's handling of an answer and this monitor's hearing of it may be. */
const SAME_TURN_MS = 5;
/** How late a renewal may be (a timer of the keeper firing late on a loaded machine) with no pause seen. */
const RENEWAL_SLACK_MS = 20;

export class Monitor {
  readonly t0 = performance.now();
  readonly #log: { at: number; text: string }[] = [];
  readonly #violations: string[] = [];
  readonly #records = new Map<string, LeaseRecord>();
  /** Lost events, by token, including those of tokens no holder saw. */
  readonly #lost = new Map<string, LostEvent & { at: number }>();
  /** Injected: busy-waits, fault windows (with the time their effects may last), operator releases, closes. */
  readonly #stalls: Span[] = [];
  readonly #faults: Span[] = [];
  readonly #operator = new Map<string, { at: number; answer?: boolean; answeredAt?: number }>();
  readonly #closes = new Map<Factory, { at: number; graceMs: number; doneAt?: number }>();
  /** Not injected: the machine's own pauses (timers that fired late, garbage collection) and slow round trips. */
  readonly #lags: Span[] = [];
  readonly #slow: Span[] = [];
  /**
   * Checks of what was seen at a step that weigh how long the loop was held up: run at the end,
   * once every pause is known (the machine's, from a worker thread that may lag behind).
   */
  readonly #timed: (() => void)[] = [];
  /** Losses each cause explained, for the summary. */
  readonly explained = new Map<string, number>();

  /** `machine`: the times since a moment when the machine kept this process from running (see engine-sampler.ts). */
  constructor(
    readonly limit: number,
    readonly ids: { semaphore: string; lock: string },
    readonly storeTimeoutMs: number,
    private readonly machine: (since: number) => Span[],
  ) {}

  /** Milliseconds since the program began, for the log. */
  t(at: number): string {
    return (at - this.t0).toFixed(1);
  }

  note(text: string, at = performance.now()): void {
    this.#log.push({ at, text });
  }

  fail(text: string): void {
    if (this.#violations.includes(text)) return;
    this.#violations.push(text);
    this.note(`VIOLATION: ${text}`);
  }

  /** The log in time order, the machine's own pauses included. */
  logText(): string {
    const entries = [...this.#log, ...this.machine(this.t0).map((span) => ({ at: span.from, text: span.what }))];
    const lines = entries.sort((a, b) => a.at - b.at).map(({ at, text }) => `${this.t(at).padStart(7)}  ${text}`);
    return (lines.length > 400 ? ["  ...", ...lines.slice(-400)] : lines).join("\n");
  }

  /** Throws the first violation found so far, with the log. */
  assertClean(): void {
    if (this.#violations.length === 0) return;
    throw new Error(`${this.#violations.join("\n")}\n\nWhat happened (ms since the program began):\n${this.logText()}`);
  }

  /** Whether the program injected a fault, or the machine slowed the store, so far: store errors are then expected. */
  get disturbed(): boolean {
    return this.#faults.length > 0 || this.#slow.length > 0;
  }

  // ---- causes ----

  stall(from: number, to: number, what: string): void {
    this.#stalls.push({ from, to, what });
    this.note(`${what} (${(to - from).toFixed(0)} ms)`, from);
  }

  lag(span: Span): void {
    this.#lags.push(span);
    this.note(span.what, span.from);
  }

  slowStore(span: Span): void {
    this.#slow.push(span);
    this.note(span.what, span.from);
  }

  fault(span: Span): void {
    this.#faults.push(span);
    this.note(span.what, span.from);
  }

  operatorRelease(token: string, at: number): void {
    this.#operator.set(token, { at });
  }

  operatorAnswered(token: string, answer: boolean): void {
    const release = this.#operator.get(token);
    if (release !== undefined) {
      release.answer = answer;
      release.answeredAt = performance.now();
    }
  }

  closing(factory: Factory, graceMs: number): void {
    this.#closes.set(factory, { at: performance.now(), graceMs });
    this.note(`close ${factory} (grace ${graceMs} ms)`);
  }

  closed(factory: Factory): void {
    const close = this.#closes.get(factory);
    if (close !== undefined) close.doneAt = performance.now();
    this.note(`${factory} closed`);
  }

  closingSince(factory: Factory): number | undefined {
    return this.#closes.get(factory)?.at;
  }

  // ---- leases ----

  records(): LeaseRecord[] {
    return [...this.#records.values()];
  }

  /** A lease was handed to its holder (an `acquire` resolved, a `run` body began): the limit must hold. */
  granted(actor: number, spec: ActorSpec, lease: Lease, calledAt: number): LeaseRecord {
    const now = performance.now();
    const record: LeaseRecord = {
      actor,
      spec,
      token: lease.token,
      lease,
      grantedAt: now,
      // The store's lease began after the call was made (a queued call: when it was granted).
      confirmed: [{ calledAt, ms: spec.leaseMs, answeredAt: now }],
      releases: [],
    };
    this.#records.set(lease.token, record);
    this.note(`actor ${actor} holds ${short(lease.token)} (${spec.factory}.${spec.via}, waited ${lease.waitedMs.toFixed(0)} ms)`);
    this.#checkLimit(record, now);
    const { signal } = lease;
    if (signal.aborted) this.#aborted(record, signal.reason);
    else signal.addEventListener("abort", () => this.#aborted(record, signal.reason), { once: true });
    return record;
  }

  /** Holders never exceed the limit, unless the ones in excess have lapsed by the engine's own deadline (and are then told). */
  #checkLimit(record: LeaseRecord, now: number): void {
    const kind = kindOf(record.spec);
    const limit = kind === "lock" ? 1 : this.limit;
    // A lease handed over already past its deadline (its answer came late) is lost on arrival: it must be told.
    if (deadlineOf(record) <= now + 1) {
      record.mustBeTold = `it was handed over at ${this.t(now)}, past its deadline`;
      return;
    }
    const others = this.records().filter((other) => other !== record && kindOf(other.spec) === kind && inside(other));
    let held = record.spec.weight;
    const lapsed: LeaseRecord[] = [];
    for (const other of others) {
      const operator = this.#operator.get(other.token);
      if (deadlineOf(other) <= now + 1 || (operator !== undefined && operator.at <= now)) lapsed.push(other);
      else held += other.spec.weight;
    }
    const list = others.map((other) => `actor ${other.actor} (weight ${other.spec.weight})`).join(", ");
    if (held > limit) {
      this.fail(
        `over the limit: actor ${record.actor} was admitted to the ${kind} (limit ${limit}) while ${list} held it, their leases live by the engine's own deadlines`,
      );
      return;
    }
    if (held + lapsed.reduce((sum, other) => sum + other.spec.weight, 0) > limit) {
      for (const other of lapsed) other.mustBeTold = `actor ${record.actor} was admitted beside it at ${this.t(now)}`;
    }
  }

  #aborted(record: LeaseRecord, reason: unknown): void {
    const now = performance.now();
    if (reason instanceof SemaphoreLeaseLostError || reason instanceof LockLeaseLostError) {
      record.toldAt = now;
      record.toldError = reason;
      this.note(`actor ${record.actor}'s signal: lost`, now);
    } else if (reason instanceof ShutdownError) {
      record.interruptedAt = now;
      this.note(`actor ${record.actor}'s signal: shutting down`, now);
    } else this.fail(`actor ${record.actor}'s lease signal aborted with ${describe(reason)}, neither a loss nor a shutdown`);
  }

  extendAnswered(record: LeaseRecord, calledAt: number, ms: number, answer: boolean | "failed"): void {
    const now = performance.now();
    this.note(`actor ${record.actor}: extend(${ms}) answered ${answer}`, now);
    if (answer === true) {
      // The engine's deadline follows the answers in the order they come.
      record.confirmed.push({ calledAt, ms, answeredAt: now });
      return;
    }
    // An answer about a lease its holder has given back meanwhile is no loss (the release may have reached the store first).
    const given = record.releases.length > 0;
    if (answer === false && !given && lossAt(record) === undefined && record.interruptedAt === undefined) {
      this.fail(`actor ${record.actor}'s extend() answered false, but its signal did not tell a loss`);
    }
  }

  releaseCalled(record: LeaseRecord): number {
    record.releases.push({ calledAt: performance.now() });
    this.note(`actor ${record.actor}: release()`);
    return record.releases.length - 1;
  }

  releaseAnswered(record: LeaseRecord, index: number, answer: boolean | "failed"): void {
    const release = record.releases[index];
    if (release !== undefined) release.answer = answer;
    this.note(`actor ${record.actor}: release() answered ${answer}`);
    if (answer === false && lossAt(record) === undefined && record.interruptedAt === undefined) {
      this.fail(`actor ${record.actor}'s release() answered false, but its signal did not tell a loss`);
    }
  }

  bodyEnded(record: LeaseRecord): void {
    record.bodyEndedAt = performance.now();
    record.deadlineAtBodyEnd = deadlineOf(record);
    this.note(`actor ${record.actor}: body ends`);
  }

  /**
   * Before the program acts on a lease from `acquire`: once the engine's own deadline has passed
   * (and its timers had time to run), the signal must have told the loss.
   */
  acting(record: LeaseRecord): void {
    const now = performance.now();
    if (record.releases.length > 0 || lossAt(record) !== undefined || record.interruptedAt !== undefined) return;
    const deadline = deadlineOf(record);
    this.#timed.push(() => {
      if (now > deadline + LATE_MS + this.#blocked(deadline, now)) {
        this.fail(
          `actor ${record.actor}'s lease passed its deadline at ${this.t(deadline)}, but at ${this.t(now)} its signal had not told the loss`,
        );
      }
    });
  }

  /**
   * At the start of a turn: every lease `run` keeps has been renewed within the last 1.5
   * heartbeats (the keeper's promise: ticks on a grid of heartbeats, at least half a heartbeat
   * apart), give or take the time the loop was held up and a round trip. The last renewal sent is
   * read off the engine's deadline (its send time plus the lease).
   */
  renewalsDue(): void {
    const now = performance.now();
    for (const record of this.#records.values()) {
      const { spec } = record;
      const heartbeat = spec.via === "run" ? effectiveHeartbeat(spec) : false;
      if (heartbeat === false || !inside(record) || record.interruptedAt !== undefined) continue;
      const renewed = Math.max(deadlineOf(record) - spec.leaseMs + 1, record.grantedAt);
      this.#timed.push(() => {
        if (this.#faults.some((span) => span.to >= renewed && span.from <= now)) return;
        const slow = this.#slow
          .filter((span) => span.to >= renewed && span.from <= now)
          .reduce((sum, span) => sum + span.to - span.from, 0);
        const due = renewed + 1.5 * heartbeat + RENEWAL_SLACK_MS + this.#blocked(renewed, now) + slow;
        if (now > due) {
          this.fail(
            `actor ${record.actor}'s lease (${spec.leaseMs} ms, heartbeat ${heartbeat} ms) was last renewed at ${this.t(renewed)}; at ${this.t(now)} the next renewal was ${(now - renewed - 1.5 * heartbeat).toFixed(0)} ms overdue, with nothing holding the loop up`,
          );
        }
      });
    }
  }

  /** The `lost` diagnostics channel. */
  lostEvent(event: LostEvent): void {
    const at = performance.now();
    this.#lost.set(event.token, { ...event, at });
    const record = this.#records.get(event.token);
    this.note(`lost event for ${record === undefined ? `unseen ${short(event.token)}` : `actor ${record.actor}`}`, at);
    if (record === undefined) return;
    record.lostAt = at;
    record.lostError = event.error;
    const { signal } = record.lease;
    if (record.interruptedAt === undefined && !(signal.aborted && signal.reason === event.error)) {
      this.fail(
        `actor ${record.actor}'s lease was reported lost, but its signal ${signal.aborted ? "aborted with another reason" : "did not abort"}`,
      );
    }
  }

  /** The `released` diagnostics channel. */
  releasedEvent(event: ReleasedEvent): void {
    const record = this.#records.get(event.token);
    if (record !== undefined && record.released === undefined) record.released = { at: performance.now(), ours: event.ours };
  }

  /** What the store holds, read after `sentAt`: within the limit, and nothing given back. */
  sampled(kind: "semaphore" | "lock", holders: Holder[], sentAt: number): void {
    const limit = kind === "lock" ? 1 : this.limit;
    const weight = holders.reduce((sum, holder) => sum + holder.weight, 0);
    if (weight > limit) this.fail(`the store holds ${weight} permits of the ${kind} (limit ${limit})`);
    for (const holder of holders) {
      const record = this.#records.get(holder.token);
      if (record?.released?.ours === true && record.released.at < sentAt) {
        this.fail(
          `the store still holds actor ${record.actor}'s lease, given back (answered true) at ${this.t(record.released.at)}`,
        );
      }
      const operator = this.#operator.get(holder.token);
      if (operator?.answer === true && (operator.answeredAt as number) < sentAt) {
        this.fail(
          `the store still holds ${short(holder.token)}, which an operator released (answered true at ${this.t(operator.answeredAt as number)})`,
        );
      }
    }
  }

  /** How a call ended, against what the program did to it. */
  outcome(
    actor: number,
    spec: ActorSpec,
    calledAt: number,
    record: LeaseRecord | undefined,
    abortedAt: number | undefined,
    settled: { ok: true; value: unknown } | { ok: false; error: unknown },
  ): void {
    const now = performance.now();
    const closing = this.closingSince(spec.factory);
    const what = `actor ${actor}'s ${spec.factory}.${spec.via}`;
    this.note(
      `${what} ${settled.ok ? `resolved ${settled.value === null ? "null" : "with its lease"}` : `rejected: ${describe(settled.error)}`}`,
      now,
    );
    if (closing !== undefined && closing <= calledAt) {
      if (settled.ok || !(settled.error instanceof ShutdownError))
        this.fail(`${what} was made after close() and did not fail with ShutdownError`);
      return;
    }
    if (settled.ok) {
      if (spec.via === "run" && record !== undefined && lossAt(record) !== undefined) {
        this.fail(`${what} resolved, though its lease was lost at ${this.t(lossAt(record) as number)}`);
      }
      return;
    }
    const { error } = settled;
    if (error instanceof SemaphoreLeaseLostError || error instanceof LockLeaseLostError) {
      if (spec.via !== "run" || record === undefined) this.fail(`${what} rejected with a loss of a lease it never held`);
      else if (record.lostError !== error) this.fail(`${what} rejected with a loss that no lost event reported`);
      else if (record.interruptedAt === undefined && record.lease.signal.reason !== error) {
        this.fail(`${what} rejected with a loss its signal did not tell`);
      }
      return;
    }
    if (error instanceof ProgramAbort) {
      if (abortedAt === undefined || error.actor !== actor) this.fail(`${what} rejected with an abort it was not given`);
      else if (record !== undefined) this.fail(`${what} rejected with its abort reason after it was admitted`);
      return;
    }
    if (error instanceof BodyFailure) {
      if (spec.via !== "run" || record === undefined || error.actor !== actor)
        this.fail(`${what} rejected with a body failure it did not throw`);
      return;
    }
    if (error instanceof ShutdownError) {
      if (closing === undefined) this.fail(`${what} rejected with ShutdownError, but nothing was closed`);
      return;
    }
    if (error instanceof SemaphoreNotAcquiredError || error instanceof LockNotAcquiredError) {
      if (spec.via !== "run" || record !== undefined) this.fail(`${what} rejected as not acquired`);
      return;
    }
    if (error instanceof StoreUnavailableError) {
      // A call the store did not answer within its bound: slow (a loaded machine, or a loop blocked
      // past the bound, which holds the answer up), or faulted.
      if (!this.disturbed && now - calledAt < this.storeTimeoutMs) {
        this.fail(
          `${what} rejected with StoreUnavailableError after ${(now - calledAt).toFixed(0)} ms, but the store was never faulted`,
        );
      }
      return;
    }
    this.fail(`${what} rejected with an unexpected error: ${describe(error)}`);
  }

  // ---- the checks at the end ----

  /** Every loss has a cause, is told through the signal, and never follows a release the store accepted. */
  finish(): void {
    for (const check of this.#timed) check();
    for (const [token, event] of this.#lost) {
      if (!this.#records.has(token)) this.fail(`a lease no holder was handed (${short(token)}) was reported lost`);
      else if (event.id !== this.ids.semaphore && event.id !== this.ids.lock)
        this.fail(`a lost event for another id: ${event.id}`);
    }
    for (const record of this.records()) {
      const who = `actor ${record.actor}'s lease`;
      const lost = lossAt(record);
      if (record.toldAt !== undefined && record.lostError !== record.toldError) {
        this.fail(`${who}: its signal told a loss that no lost event reported`);
      }
      if (record.mustBeTold !== undefined && lost === undefined) {
        this.fail(`${who} had lapsed (${record.mustBeTold}), but it was never told of a loss`);
      }
      if (lost === undefined) continue;
      const given = this.#givenBack(record, lost);
      if (given !== undefined) this.fail(`${who} was ${given}, then reported lost at ${this.t(lost)}`);
      const cause = this.#explain(record, lost);
      if (cause === undefined) {
        this.fail(
          `${who} was lost at ${this.t(lost)} (held since ${this.t(record.grantedAt)}) without a cause the program injected: no fault, no operator release, no close, no stall long enough, not left unrenewed`,
        );
      } else {
        const kind = cause.split(":")[0] as string;
        this.explained.set(kind, (this.explained.get(kind) ?? 0) + 1);
        this.note(`${who} lost at ${this.t(lost)}: ${cause}`);
      }
    }
  }

  /** How the lease had been given back before `lost`, with the store's agreement, if it had. */
  #givenBack(record: LeaseRecord, lost: number): string | undefined {
    if (record.released?.ours !== true) return undefined;
    const accepted = record.releases.find((release) => release.answer === true);
    if (accepted !== undefined && lost > accepted.calledAt) {
      return `released by its holder at ${this.t(accepted.calledAt)} (the store answered true)`;
    }
    const { bodyEndedAt, deadlineAtBodyEnd } = record;
    // `run` checks the deadline as the body ends, before it gives the lease back: a loss then is no answer to the release.
    if (
      accepted === undefined &&
      bodyEndedAt !== undefined &&
      lost > bodyEndedAt &&
      (deadlineAtBodyEnd as number) > bodyEndedAt + 1
    ) {
      return `given back by run as its body ended at ${this.t(bodyEndedAt)} (the store answered true)`;
    }
    return undefined;
  }

  /** The cause of a loss at `at`, among those the program injected or the machine added, if any. */
  #explain(record: LeaseRecord, at: number): string | undefined {
    const { spec } = record;
    const operator = this.#operator.get(record.token);
    if (operator !== undefined && operator.at <= at) return `operator: released through the store at ${this.t(operator.at)}`;
    const close = this.#closes.get(spec.factory);
    if (close !== undefined && at >= close.at + close.graceMs - 2) {
      return `close: ${spec.factory} closed at ${this.t(close.at)}, grace ${close.graceMs} ms`;
    }
    const heartbeat = spec.via === "run" ? effectiveHeartbeat(spec) : false;
    if (heartbeat === false) {
      // The lease as the last renewal answered before the loss left it. The engine acts on an
      // answer a little before this monitor hears of it: an answer heard within a few ms of the
      // loss may have come before it, or after.
      const before = record.confirmed.filter((one) => one.answeredAt < at - SAME_TURN_MS).pop();
      const around = record.confirmed.filter((one) => Math.abs(one.answeredAt - at) <= SAME_TURN_MS);
      const lapsed = [...(before === undefined ? [] : [before]), ...around].find((one) => at >= one.calledAt + one.ms - 3);
      if (lapsed !== undefined) return `unrenewed: its lease of ${lapsed.ms} ms from ${this.t(lapsed.calledAt)} ran out`;
    }
    const from = at - Math.max(spec.leaseMs, ...record.confirmed.map((one) => one.ms)) - 30;
    const fault = this.#faults.find((span) => span.to >= from && span.from <= at);
    if (fault !== undefined) return `fault: ${fault.what}`;
    if (heartbeat === false) return undefined;
    // Renewals come at most 1.5 heartbeats apart: the loop must have been held up for the rest of a lease.
    const needed = spec.leaseMs - 1.5 * heartbeat - 5;
    const blocked = this.#blocked(from, at);
    const slowest = Math.max(
      0,
      ...this.#slow.filter((span) => span.to >= from && span.from <= at).map((span) => span.to - span.from),
    );
    if (blocked + slowest >= needed) {
      const injected = this.#blocked(from, at, this.#stalls);
      const kind = injected >= needed ? "stall" : blocked >= needed ? "machine pause" : "slow store";
      return `${kind}: the loop was held up ${blocked.toFixed(0)} ms and a round trip took ${slowest.toFixed(0)} ms in its last lease (needed ${needed.toFixed(0)})`;
    }
    return undefined;
  }

  /** Milliseconds of [from, to] during which the loop was blocked (stalls, late timers, collection). */
  #blocked(from: number, to: number, spans: Span[] = [...this.#stalls, ...this.#lags, ...this.machine(from)]): number {
    const parts = spans
      .map((span) => [Math.max(span.from, from), Math.min(span.to, to)] as const)
      .filter(([a, b]) => b > a)
      .sort((x, y) => x[0] - y[0]);
    let total = 0;
    let reach = from;
    for (const [a, b] of parts) {
      const start = Math.max(a, reach);
      if (b > start) total += b - start;
      reach = Math.max(reach, b);
    }
    return total;
  }
}

/** When the holder was first told its lease was lost (its signal, or the lost event after a shutdown abort). */
export function lossAt(record: LeaseRecord): number | undefined {
  const { toldAt, lostAt } = record;
  if (toldAt === undefined) return lostAt;
  return lostAt === undefined ? toldAt : Math.min(toldAt, lostAt);
}

/** Holding and working: handed out, not given back, not told of a loss. */
function inside(record: LeaseRecord): boolean {
  return record.releases.length === 0 && record.bodyEndedAt === undefined && lossAt(record) === undefined;
}

function kindOf(spec: ActorSpec): "semaphore" | "lock" {
  return spec.factory === "lock" ? "lock" : "semaphore";
}

/** The engine's own deadline for the lease (a field of its lease handle, not of the public type). */
function deadlineOf(record: LeaseRecord): number {
  return (record.lease as unknown as { deadline: number }).deadline;
}

function short(token: string): string {
  return token.slice(0, 8);
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.constructor.name}: ${error.message.slice(0, 120)}`;
  return String(error);
}
