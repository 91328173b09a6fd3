// The engine model's runner: one program played on real timers against one store, every lease
// reported to the monitor (see engine.test.ts for the design).
import type { Redis } from "ioredis";
import { type Lease, type Lock, lock, memoryStore, redisStore, type Semaphore, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { uniquePrefix } from "../support/redis.js";
import { FaultyStore } from "./engine-faults.js";
import { BodyFailure, type LeaseRecord, lossAt, Monitor, ProgramAbort } from "./engine-monitor.js";
import {
  type Action,
  type ActorSpec,
  type Factory,
  type FaultMode,
  heartbeatMs,
  LEASES,
  type Op,
  type Program,
} from "./engine-program.js";
import type { MachineSampler } from "./engine-sampler.js";

/** The store's bound on a round trip: short, so that faults end calls quickly. */
const TIMEOUT_MS = 300;
/** How long a waiter the store has not heard from stays queued (a grant to it is reserved as long): short, as leases are. */
const WAITER_LEASE_MS = 600;

interface Actor {
  index: number;
  spec: ActorSpec;
  state: "idle" | "calling" | "held" | "done";
  calledAt: number;
  controller: AbortController | undefined;
  abortedAt: number | undefined;
  lease: Lease | undefined;
  record: LeaseRecord | undefined;
  /** Set while a `run` body waits for its next step. */
  gate: ((op: Op) => void) | undefined;
}

export type StoreKind = "memory" | "redis";

export class World {
  readonly monitor: Monitor;
  readonly #inner: Store;
  readonly #faulty: FaultyStore | undefined;
  readonly #factories: { semA: Semaphore; semB: Semaphore; lock: Lock };
  readonly #observer: { semaphore: Semaphore; lock: Lock };
  readonly #prefix = { semaphore: uniquePrefix("engine-s"), lock: uniquePrefix("engine-l") };
  readonly #ids: { semaphore: string; lock: string };
  readonly #actors: Actor[];
  readonly #closing = new Map<Factory, Promise<void>>();

  constructor(
    readonly program: Program,
    private readonly kind: StoreKind,
    redis: Redis | undefined,
    run: number,
    private readonly machine: MachineSampler,
  ) {
    this.#ids = { semaphore: `s${run}`, lock: `l${run}` };
    this.monitor = new Monitor(program.limit, this.#ids, TIMEOUT_MS, (since) => machine.spans(since));
    this.#inner =
      kind === "memory"
        ? memoryStore({ waiterLeaseMs: WAITER_LEASE_MS })
        : redisStore(redis as Redis, { timeoutMs: TIMEOUT_MS, waiterLeaseMs: WAITER_LEASE_MS });
    this.#faulty = program.wrapped ? new FaultyStore(this.#inner, TIMEOUT_MS, (span) => this.monitor.slowStore(span)) : undefined;
    const client = this.#faulty?.store ?? this.#inner;
    const { limit } = program;
    this.#factories = {
      semA: semaphore({ client, limit, prefix: this.#prefix.semaphore }),
      semB: semaphore({ client, limit, prefix: this.#prefix.semaphore }),
      lock: lock({ client, prefix: this.#prefix.lock }),
    };
    this.#observer = {
      semaphore: semaphore({ client: this.#inner, limit, prefix: this.#prefix.semaphore }),
      lock: lock({ client: this.#inner, prefix: this.#prefix.lock }),
    };
    this.#actors = program.actors.map((spec, index) => ({
      index,
      spec,
      state: "idle",
      calledAt: 0,
      controller: undefined,
      abortedAt: undefined,
      lease: undefined,
      record: undefined,
      gate: undefined,
    }));
  }

  get ids(): { semaphore: string; lock: string } {
    return this.#ids;
  }

  /** Plays the timeline, then lets every call finish and checks that every permit came back. */
  async play(): Promise<void> {
    for (const turn of this.program.turns) {
      await this.#pause(turn.gapMs);
      this.monitor.renewalsDue();
      for (const action of turn.actions) this.#do(action);
      await this.#sample();
      this.monitor.assertClean();
    }
    await this.#drain();
    await this.#end();
    await this.machine.caughtUp(performance.now());
    this.monitor.finish();
    this.monitor.assertClean();
  }

  /** Lets go of everything, whatever state a failed program left it in. */
  async stop(): Promise<void> {
    for (const actor of this.#actors) actor.gate?.({ op: "end" });
    const closing = Object.values(this.#factories).map((factory) => factory.close({ graceMs: 0 }).catch(() => {}));
    await within(Promise.all(closing), 3000);
    await Promise.all([this.#observer.semaphore.close(), this.#observer.lock.close()]).catch(() => {});
    await this.#inner.close?.().catch(() => {});
    // The embedded store keeps a timer per id until its last lease would have ended: let those
    // fire now, or they would wake the next program's event loop at a time it did not choose.
    if (this.kind === "memory") await sleep(Math.max(...this.program.actors.map((spec) => spec.leaseMs)) + 20);
  }

  // ---- the timeline ----

  async #pause(ms: number): Promise<void> {
    const start = performance.now();
    await (ms === 0 ? new Promise((resolve) => setImmediate(resolve)) : sleep(ms));
    const now = performance.now();
    const late = now - start - ms;
    // A timer late by more than a few ms: the machine held the loop up (another process, the collector).
    if (late > 3) this.monitor.lag({ from: now - late, to: now, what: `pause of ${ms} ms ended ${late.toFixed(0)} ms late` });
  }

  #actor(n: number): Actor {
    return this.#actors[n % this.#actors.length] as Actor;
  }

  #do(action: Action): void {
    switch (action.do) {
      case "start": {
        // A caller arrives: this actor, or the next one whose last call is over.
        const n = this.#actors.length;
        const idle = Array.from({ length: n }, (_, i) => this.#actor(action.actor + i)).find(
          (actor) => actor.state === "idle" || actor.state === "done",
        );
        if (idle !== undefined) this.#start(idle);
        break;
      }
      case "act":
        this.#act(this.#actor(action.actor), action.op);
        break;
      case "extendAll": {
        const renewed = this.#actors.filter(
          (actor) => actor.spec.via === "acquire" && actor.record !== undefined && actor.record.releases.length === 0,
        );
        for (const actor of renewed) this.#extend(actor, undefined);
        const done = action.release === undefined ? undefined : renewed[action.release % renewed.length];
        if (done !== undefined) this.#release(done);
        break;
      }
      case "abort":
        this.#abort(this.#actor(action.actor));
        break;
      case "stall":
        this.#stall(action.ms, "the program stalls the loop");
        break;
      case "fault":
        this.#fault(action.mode, action.ms, action.delayMs);
        break;
      case "operator":
        this.#operator(this.#actor(action.actor));
        break;
      case "close":
        this.#close(action.factory, action.graceMs);
        break;
    }
  }

  /** Makes the actor's call; an actor whose last call is over calls again (a client that comes back). */
  #start(actor: Actor): void {
    if (actor.state === "calling" || actor.state === "held") return;
    const { spec, index } = actor;
    actor.state = "calling";
    actor.calledAt = performance.now();
    actor.controller = spec.withSignal ? new AbortController() : undefined;
    actor.abortedAt = undefined;
    actor.lease = undefined;
    actor.record = undefined;
    actor.gate = undefined;
    const signal = actor.controller === undefined ? {} : { signal: actor.controller.signal };
    const waiting = spec.waitMs > 0 ? { waitMs: spec.waitMs } : {};
    const heartbeat = heartbeatMs(spec);
    const keeping = heartbeat === undefined ? {} : { heartbeatMs: heartbeat };
    this.monitor.note(`start actor ${index}: ${spec.factory}.${spec.via}`);
    let call: Promise<unknown>;
    if (spec.via === "acquire") {
      const acquiring =
        spec.factory === "lock"
          ? this.#factories.lock.acquire(this.#ids.lock, { ttlMs: spec.leaseMs, ...waiting, ...signal })
          : this.#factories[spec.factory].acquire(this.#ids.semaphore, {
              leaseMs: spec.leaseMs,
              weight: spec.weight,
              ...waiting,
              ...signal,
            });
      call = acquiring.then((lease) => {
        if (lease !== null) this.#granted(actor, lease);
        else actor.state = "done";
        return lease;
      });
    } else {
      const body = (lease: Lease) => this.#body(actor, lease);
      call =
        spec.factory === "lock"
          ? this.#factories.lock.run(this.#ids.lock, body, { ttlMs: spec.leaseMs, ...waiting, ...signal, ...keeping })
          : this.#factories[spec.factory].run(this.#ids.semaphore, body, {
              leaseMs: spec.leaseMs,
              weight: spec.weight,
              ...waiting,
              ...signal,
              ...keeping,
            });
    }
    call.then(
      (value) => {
        if (spec.via === "run") actor.state = "done";
        this.monitor.outcome(index, spec, actor.calledAt, actor.record, actor.abortedAt, { ok: true, value });
      },
      (error: unknown) => {
        actor.state = "done";
        this.monitor.outcome(index, spec, actor.calledAt, actor.record, actor.abortedAt, { ok: false, error });
      },
    );
  }

  #granted(actor: Actor, lease: Lease): LeaseRecord {
    if (actor.abortedAt !== undefined) this.monitor.fail(`actor ${actor.index} was handed a lease after its call was aborted`);
    actor.lease = lease;
    actor.state = "held";
    actor.record = this.monitor.granted(actor.index, actor.spec, lease, actor.calledAt);
    return actor.record;
  }

  /** A `run` body: does what the timeline tells it, turn by turn, until told to end or throw. */
  async #body(actor: Actor, lease: Lease): Promise<string> {
    const record = this.#granted(actor, lease);
    try {
      for (;;) {
        const op = await this.#next(actor, actor.spec.honours ? lease.signal : undefined);
        if (op.op === "end") return "done";
        if (op.op === "throw") throw new BodyFailure(actor.index);
        this.#apply(actor, op);
      }
    } finally {
      actor.gate = undefined;
      this.monitor.bodyEnded(record);
    }
  }

  /** The body's next step; with `signal` (a body that honours it), its abort reason once it aborts. */
  #next(actor: Actor, signal: AbortSignal | undefined): Promise<Op> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const aborted = () => {
        actor.gate = undefined;
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", aborted, { once: true });
      actor.gate = (op) => {
        signal?.removeEventListener("abort", aborted);
        actor.gate = undefined;
        resolve(op);
      };
    });
  }

  #act(actor: Actor, op: Op): void {
    if (actor.gate !== undefined) actor.gate(op);
    else if (actor.spec.via === "acquire" && actor.record !== undefined) this.#apply(actor, op);
  }

  #apply(actor: Actor, op: Op): void {
    switch (op.op) {
      case "work":
        break;
      case "extend": {
        // A body never shortens its own lease (its keeper would then let it lapse, as documented).
        const shorter = actor.spec.via === "run" && op.ms !== undefined && op.ms < actor.spec.leaseMs;
        this.#extend(actor, shorter ? undefined : op.ms);
        break;
      }
      case "stall":
        this.#stall(op.ms, `actor ${actor.index} stalls the loop`);
        break;
      case "release":
      case "end":
      case "throw":
        this.#release(actor);
        break;
    }
  }

  #extend(actor: Actor, ms: number | undefined): void {
    const { lease, record } = actor;
    if (lease === undefined || record === undefined) return;
    if (actor.spec.via === "acquire") this.monitor.acting(record);
    const calledAt = performance.now();
    const length = ms ?? actor.spec.leaseMs;
    this.monitor.note(`actor ${actor.index}: extend(${ms ?? ""})`, calledAt);
    lease.extend(ms).then(
      (answer) => this.monitor.extendAnswered(record, calledAt, length, answer),
      () => this.monitor.extendAnswered(record, calledAt, length, "failed"),
    );
  }

  #release(actor: Actor): void {
    const { lease, record } = actor;
    if (lease === undefined || record === undefined) return;
    // Once, unless the store did not answer (the lease may then still be held).
    if (record.releases.some((release) => release.answer !== "failed")) return;
    if (actor.spec.via === "acquire") this.monitor.acting(record);
    const index = this.monitor.releaseCalled(record);
    lease.release().then(
      (answer) => {
        this.monitor.releaseAnswered(record, index, answer);
        if (actor.spec.via === "acquire") actor.state = "done";
      },
      () => this.monitor.releaseAnswered(record, index, "failed"),
    );
  }

  #abort(actor: Actor): void {
    if (actor.controller === undefined || actor.abortedAt !== undefined || actor.state === "idle" || actor.state === "done")
      return;
    actor.abortedAt = performance.now();
    this.monitor.note(`abort actor ${actor.index}'s call`);
    actor.controller.abort(new ProgramAbort(actor.index));
  }

  #stall(ms: number, what: string): void {
    const from = performance.now();
    while (performance.now() - from < ms) {
      // Busy: the event loop is blocked, as by a long synchronous computation.
    }
    this.monitor.stall(from, performance.now(), what);
  }

  #fault(mode: FaultMode, ms: number, delayMs: number): void {
    if (this.#faulty === undefined) return;
    const window = this.#faulty.inject(mode, ms, delayMs);
    // Calls made in the window may be answered (or time out) this long after it closes.
    const effect = (mode === "slow" ? delayMs : 0) + TIMEOUT_MS + 50;
    this.monitor.fault({ from: window.from, to: window.to + effect, what: `store ${mode} for ${ms} ms` });
  }

  #operator(actor: Actor): void {
    const { record, spec } = actor;
    if (record === undefined || record.releases.length > 0 || lossAt(record) !== undefined) return;
    const token = record.token;
    this.monitor.operatorRelease(token, performance.now());
    this.monitor.note(`an operator releases actor ${actor.index}'s lease`);
    const answer =
      spec.factory === "lock"
        ? this.#inner.lock.release({ storeKey: storeKey(this.#prefix.lock, "lock", this.#ids.lock), token })
        : this.#inner.semaphore.release({ storeKey: storeKey(this.#prefix.semaphore, "semaphore", this.#ids.semaphore), token });
    Promise.resolve(answer).then(
      (live) => this.monitor.operatorAnswered(token, live),
      (error: unknown) => this.monitor.fail(`the operator's release failed: ${String(error)}`),
    );
  }

  #close(factory: Factory, graceMs: number): void {
    if (this.#closing.has(factory)) return;
    this.monitor.closing(factory, graceMs);
    const closing = this.#factories[factory].close({ graceMs }).then(
      () => this.#closed(factory),
      (error: unknown) => this.monitor.fail(`${factory}.close() rejected: ${String(error)}`),
    );
    this.#closing.set(factory, closing);
  }

  /** A closed factory holds nothing: its permits are free the moment `close()` resolves. */
  async #closed(factory: Factory): Promise<void> {
    this.monitor.closed(factory);
    if (this.monitor.disturbed) return;
    const kind = factory === "lock" ? "lock" : "semaphore";
    for (const holder of await this.#holders(kind)) {
      const record = this.monitor.records().find((one) => one.token === holder.token);
      if (record?.spec.factory === factory) {
        this.monitor.fail(`${factory}.close() resolved while the store still held actor ${record.actor}'s permit`);
      }
    }
  }

  async #holders(kind: "semaphore" | "lock") {
    if (kind === "semaphore") return this.#observer.semaphore.holders(this.#ids.semaphore);
    const holder = await this.#observer.lock.holder(this.#ids.lock);
    return holder === null ? [] : [holder];
  }

  /** What the store holds after the turn: within the limit, and nothing given back. */
  async #sample(): Promise<void> {
    const sentAt = performance.now();
    const [semaphoreHolders, lockHolders] = await Promise.all([this.#holders("semaphore"), this.#holders("lock")]);
    this.monitor.sampled("semaphore", semaphoreHolders, sentAt);
    this.monitor.sampled("lock", lockHolders, sentAt);
  }

  // ---- the end ----

  /** Ends every body, releases every lease, and waits for every call to settle. */
  async #drain(): Promise<void> {
    this.monitor.note("the timeline is over: every body ends, every lease is released");
    const bound = performance.now() + 10_000;
    for (;;) {
      let busy = false;
      for (const actor of this.#actors) {
        if (actor.gate !== undefined) {
          actor.gate({ op: "end" });
          busy = true;
        } else if (actor.state === "calling") busy = true;
        else if (actor.state === "held") {
          busy = true;
          const releases = actor.record?.releases ?? [];
          const last = releases[releases.length - 1];
          // Once, and again every 100 ms while the store does not answer.
          const retry = last === undefined || (last.answer === "failed" && performance.now() - last.calledAt > 100);
          if (actor.spec.via === "acquire" && retry) this.#release(actor);
        }
      }
      if (!busy) return;
      if (performance.now() > bound) {
        const stuck = this.#actors.filter((actor) => actor.state === "calling" || actor.state === "held");
        this.monitor.fail(
          `calls still unsettled 10 s after the timeline: ${stuck.map((actor) => `actor ${actor.index} (${actor.state})`).join(", ")}`,
        );
        return;
      }
      await sleep(20);
    }
  }

  /** Closes every factory, then the store must be empty (at once, or once leases lapse after a fault). */
  async #end(): Promise<void> {
    const closes = (["semA", "semB", "lock"] as const).map((factory) => {
      this.#close(factory, 0);
      return this.#closing.get(factory) as Promise<void>;
    });
    if (!(await within(Promise.all(closes), 10_000))) this.monitor.fail("close() did not resolve within 10 s");
    const empty = async (): Promise<string | undefined> => {
      const [semaphoreHolders, lockHolders, stats] = await Promise.all([
        this.#holders("semaphore"),
        this.#holders("lock"),
        this.#observer.semaphore.stats(this.#ids.semaphore),
      ]);
      if (semaphoreHolders.length + lockHolders.length + stats.used + stats.waiting === 0) return undefined;
      return `${semaphoreHolders.length} semaphore holders, ${lockHolders.length} lock holders, ${stats.used} permits used, ${stats.waiting} waiting`;
    };
    let left = await empty();
    if (left !== undefined && this.monitor.disturbed) {
      // A release the store never answered: its permit lapses with its lease; a waiter that could
      // not leave the queue, with its waiter lease (and a grant reserved for it, as long).
      const bound = performance.now() + Math.max(...LEASES, WAITER_LEASE_MS) + 1000;
      while (left !== undefined && performance.now() < bound) {
        await sleep(25);
        left = await empty();
      }
    }
    if (left !== undefined)
      this.monitor.fail(`permits did not all return once every call settled and every factory closed: ${left}`);
  }
}

/** Whether `promise` settled within `ms`; the timer is cleared either way (a pending one would wake the next program's loop). */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), bound]);
  } finally {
    clearTimeout(timer);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
