// The programs the engine model plays (see engine.test.ts): who calls what, and a timeline of
// turns, each a pause and then actions taken together in one turn of the event loop.
import fc from "fast-check";

/** The objects a program calls: two semaphores on one id (two "replicas" in one process) and a lock. */
export type Factory = "semA" | "semB" | "lock";

/** `default`: the engine's own (a quarter lease); `third`, `half`: of the lease; `off`: `heartbeatMs: false`. */
export type Heartbeat = "default" | "third" | "half" | "off";

/** One caller: a single `run` or `acquire` call, made when the timeline starts it. */
export interface ActorSpec {
  factory: Factory;
  via: "run" | "acquire";
  leaseMs: number;
  heartbeat: Heartbeat;
  /** Permits taken on the semaphore (1 on the lock). */
  weight: number;
  /** 0 fails fast; more waits in the id's queue. */
  waitMs: number;
  /** Passes a signal of its own, which an `abort` action aborts. */
  withSignal: boolean;
  /** A `run` body that stops (throws the reason) when its lease's signal aborts; otherwise it works on. */
  honours: boolean;
}

/**
 * What an actor does when told to: inside a `run` body, the body does it; with a lease from
 * `acquire`, the timeline does it to the lease (`end` and `throw` then release it).
 */
export type Op =
  | { op: "work" }
  | { op: "extend"; ms: number | undefined }
  | { op: "release" }
  | { op: "stall"; ms: number }
  | { op: "end" }
  | { op: "throw" };

export type FaultMode = "down" | "slow" | "deaf";

export type Action =
  /** A caller arrives: the actor calls, or the next one (in order) whose last call is over. */
  | { do: "start"; actor: number }
  | { do: "act"; actor: number; op: Op }
  /**
   * Every lease held from `acquire` renews (`extend()` unawaited), in actor order, in this turn;
   * then, with `release`, one of them (that number among the renewed, modulo their count), done,
   * gives its lease back in the same turn.
   */
  | { do: "extendAll"; release: number | undefined }
  /** Aborts the signal the actor's call passed. */
  | { do: "abort"; actor: number }
  /** Blocks the event loop (a busy-wait). */
  | { do: "stall"; ms: number }
  /** The store misbehaves for `ms`: refuses calls, answers them `delayMs` late (in order), or never answers. */
  | { do: "fault"; mode: FaultMode; ms: number; delayMs: number }
  /** An operator frees the actor's lease through the store (what `leasehold release --token` does). */
  | { do: "operator"; actor: number }
  | { do: "close"; factory: Factory; graceMs: number };

export interface Turn {
  /** The pause before this turn's actions (a real timer; 0: the next turn of the loop). */
  gapMs: number;
  actions: Action[];
}

export interface Program {
  /** The semaphore's limit (the lock's is 1). */
  limit: number;
  actors: ActorSpec[];
  turns: Turn[];
  /** Calls go through a wrapper store that can fail them (on the memory store this leaves its in-process path). */
  wrapped: boolean;
}

export const LEASES = [50, 100, 200, 400] as const;

/** The heartbeat in ms a spec passes to `run` (undefined: the engine's default), or false. */
export function heartbeatMs(spec: ActorSpec): number | false | undefined {
  switch (spec.heartbeat) {
    case "default":
      return undefined;
    case "third":
      return Math.floor(spec.leaseMs / 3);
    case "half":
      return Math.floor(spec.leaseMs / 2);
    case "off":
      return false;
  }
}

/** The heartbeat the keeper uses, in ms (the engine's default spelled out), or false. */
export function effectiveHeartbeat(spec: ActorSpec): number | false {
  return heartbeatMs(spec) ?? Math.max(1, Math.floor(spec.leaseMs / 4));
}

/**
 * Two tempos. A quiet program has few callers, mostly `run`, and long pauses: a lease often runs
 * alone in an idle process, where nothing but the engine's own timers wakes the event loop. A
 * busy one has many callers on one id, mostly holding leases from `acquire`, acting in the same
 * turns: renewals and releases of one id meet in one turn, and waiters queue.
 */
interface Tempo {
  actors: { minLength: number; maxLength: number };
  /** `run` against `acquire`. */
  limits: number[];
  factories: Factory[];
  via: ActorSpec["via"][];
  leases: number[];
  gaps: number[];
  actions: { minLength: number; maxLength: number };
  turns: { minLength: number; maxLength: number };
  /** How often each action is drawn (a close ends most of a program: rare). */
  weights: Record<Action["do"], number>;
}

const TEMPOS: Record<"quiet" | "busy", Tempo> = {
  quiet: {
    actors: { minLength: 1, maxLength: 4 },
    limits: [1, 2, 3],
    factories: ["semA", "semA", "semB", "lock"],
    via: ["run", "run", "run", "acquire"],
    leases: [...LEASES],
    gaps: [10, 30, 80, 150, 300, 300],
    actions: { minLength: 1, maxLength: 3 },
    turns: { minLength: 4, maxLength: 12 },
    weights: { start: 40, act: 30, extendAll: 3, abort: 4, stall: 4, fault: 4, operator: 2, close: 1 },
  },
  busy: {
    actors: { minLength: 6, maxLength: 10 },
    limits: [3, 4, 5, 6],
    factories: ["semA", "semA", "semB", "semB", "lock"],
    via: ["run", "acquire", "acquire", "acquire", "acquire"],
    leases: [100, 200, 400, 400],
    gaps: [0, 2, 10, 10, 30, 30, 80, 150],
    actions: { minLength: 2, maxLength: 6 },
    turns: { minLength: 6, maxLength: 14 },
    weights: { start: 40, act: 30, extendAll: 20, abort: 3, stall: 2, fault: 2, operator: 2, close: 1 },
  },
};

function actorArbitrary(tempo: Tempo): fc.Arbitrary<ActorSpec> {
  return fc
    .record({
      factory: fc.constantFrom(...tempo.factories),
      via: fc.constantFrom(...tempo.via),
      leaseMs: fc.constantFrom(...tempo.leases),
      heartbeat: fc.constantFrom<Heartbeat>("default", "default", "third", "half", "off"),
      weight: fc.constantFrom(1, 1, 1, 2),
      waitMs: fc.constantFrom(0, 0, 100, 300),
      withSignal: fc.boolean(),
      honours: fc.boolean(),
    })
    .map((spec) => ({
      ...spec,
      // Renewing every half lease leaves too little room for a loaded machine's own pauses on the
      // short leases: a loss there would say nothing about the engine.
      heartbeat:
        (spec.heartbeat === "half" && spec.leaseMs < 200) || (spec.heartbeat === "third" && spec.leaseMs < 100)
          ? "default"
          : spec.heartbeat,
      weight: spec.factory === "lock" ? 1 : spec.weight,
    }));
}

const opArbitrary: fc.Arbitrary<Op> = fc.oneof(
  { weight: 1, arbitrary: fc.constant<Op>({ op: "work" }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(undefined, undefined, ...LEASES).map((ms): Op => ({ op: "extend", ms })),
  },
  { weight: 2, arbitrary: fc.constant<Op>({ op: "release" }) },
  { weight: 1, arbitrary: fc.constantFrom(2, 5, 30, 120).map((ms): Op => ({ op: "stall", ms })) },
  { weight: 2, arbitrary: fc.constant<Op>({ op: "end" }) },
  { weight: 1, arbitrary: fc.constant<Op>({ op: "throw" }) },
);

/** Actor numbers are taken modulo the program's actors, so shrinking the actors keeps every action valid. */
const actorNumber = fc.nat({ max: 15 });

function actionArbitrary(weights: Tempo["weights"]): fc.Arbitrary<Action> {
  return fc.oneof(
    { weight: weights.start, arbitrary: actorNumber.map((actor): Action => ({ do: "start", actor })) },
    {
      weight: weights.act,
      arbitrary: fc.record({ actor: actorNumber, op: opArbitrary }).map(({ actor, op }): Action => ({ do: "act", actor, op })),
    },
    {
      weight: weights.extendAll,
      arbitrary: fc.option(actorNumber, { nil: undefined }).map((release): Action => ({ do: "extendAll", release })),
    },
    { weight: weights.abort, arbitrary: actorNumber.map((actor): Action => ({ do: "abort", actor })) },
    { weight: weights.stall, arbitrary: fc.constantFrom(2, 5, 30, 120, 450).map((ms): Action => ({ do: "stall", ms })) },
    {
      weight: weights.fault,
      arbitrary: fc
        .record({
          mode: fc.constantFrom<FaultMode>("down", "slow", "deaf"),
          ms: fc.constantFrom(40, 150, 400),
          delayMs: fc.constantFrom(20, 100, 350),
        })
        .map((fault): Action => ({ do: "fault", ...fault })),
    },
    { weight: weights.operator, arbitrary: actorNumber.map((actor): Action => ({ do: "operator", actor })) },
    {
      weight: weights.close,
      arbitrary: fc
        .record({ factory: fc.constantFrom<Factory>("semA", "semB", "lock"), graceMs: fc.constantFrom(0, 50, 300) })
        .map(({ factory, graceMs }): Action => ({ do: "close", factory, graceMs })),
    },
  );
}

function tempoArbitrary(tempo: Tempo, wrapped: "always" | "never" | "drawn"): fc.Arbitrary<Program> {
  return fc.record({
    limit: fc.constantFrom(...tempo.limits),
    actors: fc.array(actorArbitrary(tempo), tempo.actors),
    turns: fc.array(
      fc.record({ gapMs: fc.constantFrom(...tempo.gaps), actions: fc.array(actionArbitrary(tempo.weights), tempo.actions) }),
      tempo.turns,
    ),
    wrapped: wrapped === "drawn" ? fc.constantFrom(false, false, true) : fc.constant(wrapped === "always"),
  });
}

/**
 * Programs over one store: `wrapped` says whether calls may be faulted (`always`, `never`, or
 * drawn); `busy`, the share of busy programs (the rest are quiet).
 */
export function programArbitrary(wrapped: "always" | "never" | "drawn", busy: number): fc.Arbitrary<Program> {
  return fc
    .oneof(
      { weight: Math.round(100 * (1 - busy)), arbitrary: tempoArbitrary(TEMPOS.quiet, wrapped) },
      { weight: Math.round(100 * busy), arbitrary: tempoArbitrary(TEMPOS.busy, wrapped) },
    )
    .map((program) => ({
      ...program,
      // A weight above the limit is refused before any call (a ValidationError): not a program worth playing.
      actors: program.actors.map((spec) => ({ ...spec, weight: Math.min(spec.weight, program.limit) })),
    }));
}

/** A program as lines a failure report can show. */
export function describeProgram(program: Program): string {
  const lines = [`limit ${program.limit}${program.wrapped ? ", calls through a faulting wrapper" : ""}`];
  program.actors.forEach((spec, i) => {
    const { factory, via, leaseMs, heartbeat, weight, waitMs, withSignal, honours } = spec;
    const traits = [
      `lease ${leaseMs}`,
      via === "run" ? `heartbeat ${heartbeat}` : "",
      factory === "lock" ? "" : `weight ${weight}`,
      waitMs > 0 ? `waits ${waitMs}` : "",
      withSignal ? "own signal" : "",
      via === "run" ? (honours ? "honours its signal" : "ignores its signal") : "",
    ].filter((trait) => trait !== "");
    lines.push(`  actor ${i}: ${factory}.${via} (${traits.join(", ")})`);
  });
  for (const [i, turn] of program.turns.entries()) {
    lines.push(`  turn ${i} after ${turn.gapMs} ms: ${turn.actions.map((action) => describeAction(action, program)).join("; ")}`);
  }
  return lines.join("\n");
}

function describeAction(action: Action, program: Program): string {
  const who = (n: number) => `actor ${n % program.actors.length}`;
  switch (action.do) {
    case "start":
      return `start ${who(action.actor)}`;
    case "act": {
      const { op } = action;
      const what = op.op === "extend" ? `extend(${op.ms ?? ""})` : op.op === "stall" ? `stall ${op.ms} ms` : op.op;
      return `${who(action.actor)}: ${what}`;
    }
    case "extendAll":
      return `every acquired lease extends${action.release === undefined ? "" : `, then renewed lease #${action.release} releases`}`;
    case "abort":
      return `abort ${who(action.actor)}'s call`;
    case "stall":
      return `stall ${action.ms} ms`;
    case "fault":
      return `store ${action.mode} for ${action.ms} ms${action.mode === "slow" ? ` (+${action.delayMs} ms a call)` : ""}`;
    case "operator":
      return `operator releases ${who(action.actor)}'s lease`;
    case "close":
      return `close ${action.factory} (grace ${action.graceMs} ms)`;
  }
}
