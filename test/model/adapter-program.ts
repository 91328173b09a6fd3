// The programs the adapter model plays (see adapter.test.ts): requests to one guarded route, each
// with a script its handler follows, what its client does, and what happens around them.
import fc from "fast-check";

/** How the route is guarded. */
export type Form =
  | "express"
  /** Hono: `app.get(path, guard, handler)`. */
  | "hono"
  /** Hono: `app.get(path, guard, timeout(TIMEOUT_MS), handler)`: a middleware between guard and handler. */
  | "hono-timeout"
  /** Hono: `app.get(path, guard.wrap(handler))`. */
  | "hono-wrap"
  /** NestJS on Express: `@Semaphore` on the controller method. */
  | "nest";

export const FORMS: Form[] = ["express", "hono", "hono-timeout", "hono-wrap", "nest"];

/** Hono's `timeout()` between guard and handler. */
export const TIMEOUT_MS = 100;
/** The route's `disconnectGraceMs`. */
export const GRACE_MS = 250;
/** The grace of a shutdown: `close({ graceMs })`, Nest's `shutdownGraceMs`. */
export const CLOSE_GRACE_MS = 150;
/** The route's lease, long enough that a busy machine does not let it run out, and a heartbeat short enough that an operator's release is found within a few turns. */
export const LEASE_MS = 2_000;
export const HEARTBEAT_MS = 40;

/** Hono's stream helpers; the other frameworks stream their own way (`res.write`, a `StreamableFile`). */
export type Helper = "stream" | "streamText" | "streamSSE";

/** One request: when it is sent, what its handler does, and what its client does. */
export interface RequestPlan {
  /** Sent this many ms after the program starts. */
  at: number;
  head: boolean;
  /** A plain answer after the work, or a streamed body: a first chunk, more work, the rest. */
  shape: "plain" | "stream";
  helper: Helper;
  /** The handler's work before it answers (plain) or writes its first chunk (stream). */
  workMs: number;
  /** A stream's work after its first chunk (its callback's, where there is one). */
  streamMs: number;
  /** Stops on `lease.signal` and lets its reason propagate; otherwise works on regardless. */
  honours: boolean;
  /** Throws its own error: before the response started, or (a stream) after its first chunk. */
  fails: "no" | "before" | "after";
  /** Gives its permit back itself (`lease.release()`) when it starts or after its work, then works on. */
  release: "no" | "start" | "middle";
  /** The client leaves: never, this many ms after sending, or when the first byte of the body arrives. */
  leave: "never" | "firstByte" | number;
}

export interface Program {
  form: Form;
  limit: number;
  requests: RequestPlan[];
  /** At `at` ms an operator frees one of the leases held then (the `nth`, modulo their number), as `leasehold release` does. */
  steal: { at: number; nth: number } | undefined;
  /** The guard (Nest: the app) shuts down at `at` ms. */
  shutdown: { at: number } | undefined;
}

const requestArbitrary: fc.Arbitrary<RequestPlan> = fc.record({
  at: fc.integer({ min: 0, max: 300 }),
  head: fc.integer({ min: 0, max: 5 }).map((n) => n === 0),
  shape: fc.constantFrom<RequestPlan["shape"]>("plain", "stream", "stream"),
  helper: fc.constantFrom<Helper>("stream", "streamText", "streamSSE"),
  workMs: fc.constantFrom(0, 20, 60, 150, 300),
  streamMs: fc.constantFrom(0, 30, 100, 300, 500),
  honours: fc.boolean(),
  fails: fc.constantFrom<RequestPlan["fails"]>("no", "no", "no", "before", "after"),
  release: fc.constantFrom<RequestPlan["release"]>("no", "no", "no", "no", "start", "middle"),
  leave: fc.oneof(
    { weight: 3, arbitrary: fc.constant<"never">("never") },
    { weight: 2, arbitrary: fc.constant<"firstByte">("firstByte") },
    { weight: 2, arbitrary: fc.integer({ min: 0, max: 250 }) },
  ),
});

/** A program over `form`: 2 to 7 requests to a semaphore of limit 1 or 2, maybe an operator's release and a shutdown. */
export function programArbitrary(form: Form): fc.Arbitrary<Program> {
  return fc
    .record({
      limit: fc.constantFrom(1, 2),
      requests: fc.array(requestArbitrary, { minLength: 2, maxLength: 7 }),
      steal: fc.option(fc.record({ at: fc.integer({ min: 20, max: 400 }), nth: fc.nat(6) }), { freq: 3 }),
      shutdown: fc.option(fc.record({ at: fc.integer({ min: 50, max: 600 }) }), { freq: 3 }),
    })
    .map(({ limit, requests, steal, shutdown }) => ({
      form,
      limit,
      requests,
      steal: steal ?? undefined,
      shutdown: shutdown ?? undefined,
    }));
}

function describeRequest(plan: RequestPlan, index: number): string {
  const parts = [`#${index} at ${plan.at} ms: ${plan.head ? "HEAD" : "GET"}`];
  parts.push(
    plan.shape === "plain" ? `plain after ${plan.workMs} ms` : `${plan.helper} after ${plan.workMs} ms, then ${plan.streamMs} ms`,
  );
  parts.push(plan.honours ? "honours its signal" : "ignores its signal");
  if (plan.fails !== "no") parts.push(`throws ${plan.fails} the response started`);
  if (plan.release !== "no") parts.push(`releases early (${plan.release})`);
  if (plan.leave !== "never")
    parts.push(plan.leave === "firstByte" ? "client leaves at the first byte" : `client leaves after ${plan.leave} ms`);
  return parts.join(", ");
}

/** The program as a reader wants it in a failure's message. */
export function describeProgram(program: Program): string {
  const lines = [
    `form ${program.form}, limit ${program.limit}`,
    ...program.requests.map((plan, index) => `  ${describeRequest(plan, index)}`),
  ];
  if (program.steal !== undefined)
    lines.push(
      `  at ${program.steal.at} ms an operator frees the lease held by the #${program.steal.nth} (modulo) of those holding one`,
    );
  if (program.shutdown !== undefined) lines.push(`  shutdown at ${program.shutdown.at} ms`);
  return lines.join("\n");
}
