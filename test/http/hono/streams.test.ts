// Hono's streaming helpers (`stream`, `streamText`, `streamSSE`) behind a guard of limit 1: the
// permit counts the stream callback's work, not the connection. A client that leaves after the
// first chunk does not free the permit while the callback still runs; the callback is told through
// `lease.signal`, and the permit returns when it settles, or at `disconnectGraceMs`, reported lost
// with the departure as its cause (issue #27, defect 3). A Response the handler builds from its own
// stream (an SSE proxy) is held the same way (issue #27). Over Node (`@hono/node-server`) and
// `app.fetch`, the middleware and `wrap`, the embedded store and Redis.
import { type Context, Hono } from "hono";
import { stream, streamSSE, streamText } from "hono/streaming";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore } from "../../../integrations/hono/index.js";
import type { RequestLease } from "../../../integrations/http/types.js";
import { ClientAbortedError, semaphore as engine, SemaphoreLeaseLostError } from "../../../src/index.js";
import { eventually, gate, spyStore } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { type HonoCall, type HonoRuntime, honoRuntimes } from "./runtimes.js";

/** What a stream callback does with its stream: write a chunk; hear Hono's own abort. */
interface Writer {
  write(text: string): Promise<unknown>;
  onAbort(listener: () => void): void;
}

type Body = (write: Writer) => Promise<void>;

/** The three helpers, each made to run the same callback. */
const helpers: { name: string; respond(c: Context, body: Body): Response }[] = [
  { name: "stream", respond: (c, body) => stream(c, (s) => body({ write: (t) => s.write(t), onAbort: (l) => s.onAbort(l) })) },
  {
    name: "streamText",
    respond: (c, body) => streamText(c, (s) => body({ write: (t) => s.write(t), onAbort: (l) => s.onAbort(l) })),
  },
  {
    name: "streamSSE",
    respond: (c, body) => streamSSE(c, (s) => body({ write: (t) => s.writeSSE({ data: t }), onAbort: (l) => s.onAbort(l) })),
  },
  // No helper: the handler builds its own Response from a stream it feeds in the background, as
  // hand-written SSE proxies do (issue #27). Its body is the same work as the helpers' streams.
  { name: "new Response(stream)", respond: (_c, body) => builtResponse(body) },
];

/** A Response the handler builds itself, its body a TransformStream that `body` feeds after the handler returned. */
function builtResponse(body: Body): Response {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  void body({
    write: (text) => writer.write(encoder.encode(text)),
    // The reader cancelled the readable side: the writable side errors.
    onAbort: (listener) => void writer.closed.catch(listener),
  }).then(
    () => writer.close().catch(() => {}),
    (error: unknown) => writer.abort(error).catch(() => {}),
  );
  return new Response(readable, { headers: { "content-type": "text/event-stream" } });
}

/** Each test its own lease ids: a permit one leaks cannot refuse the next. */
let serial = 0;

describe.each(bothStores)("Hono stream helpers behind a guard, on the $name store", ({ make }) => {
  describe.each(honoRuntimes)("served by $name", (runtime: HonoRuntime) => {
    describe.each(["middleware", "wrap"] as const)("guarded by the %s", (form) => {
      let server: Awaited<ReturnType<HonoRuntime["start"]>> | undefined;
      /** One test's record, captured by its app's closures: a callback a failed test left running cannot write into the next. */
      let seen: {
        calls: ReturnType<typeof spyStore>["calls"];
        count(route: string): Promise<number>;
        gates: Map<string, () => void>;
        /** Why each request's signal aborted; which callbacks heard Hono's abort; which ended. */
        reasons: Map<string, unknown>;
        honoAborted: Set<string>;
        ended: string[];
        losses: { id: string; error: Error }[];
        working: number;
        most: number;
        /** Acquires refused (they take nothing, so they release nothing). */
        refused: number;
      };

      const open = (id: string) => seen.gates.get(id)?.();

      async function serve(helper: (typeof helpers)[number]) {
        const spied = spyStore(make(), {}, 2_000);
        const client = spied.store;
        const suffix = `-${++serial}`;
        const record: typeof seen = {
          calls: spied.calls,
          count: (route) => engine({ client, limit: 1 }).count(route + suffix),
          gates: new Map(),
          reasons: new Map(),
          honoAborted: new Set(),
          ended: [],
          losses: [],
          working: 0,
          most: 0,
          refused: 0,
        };
        seen = record;
        const app = new Hono();
        const onLeaseLost = (error: Error, c: Context) => record.losses.push({ id: c.req.header("x-id") ?? "", error });
        // Waits for the test, whatever its client does: a callback that ignores the departure.
        const held = semaphore(`held${suffix}`, 1, { client, disconnectGraceMs: 60_000, onLeaseLost });
        const ignoring = semaphore(`ignoring${suffix}`, 1, { client, disconnectGraceMs: 300, onLeaseLost });
        // Stops when its signal aborts: what the docs ask of a stream callback.
        const heeding = semaphore(`heeding${suffix}`, 1, { client, disconnectGraceMs: 60_000, onLeaseLost });
        const callback = (c: Context, until: (lease: RequestLease, id: string) => Promise<unknown>) =>
          helper.respond(c, async (writer) => {
            const id = c.req.header("x-id") ?? "";
            const lease = c.get("lease") as RequestLease;
            lease.signal.addEventListener("abort", () => record.reasons.set(id, lease.signal.reason), { once: true });
            writer.onAbort(() => record.honoAborted.add(id));
            record.working++;
            record.most = Math.max(record.most, record.working);
            try {
              await writer.write("first");
              await until(lease, id);
              await writer.write("second");
            } finally {
              record.working--;
              record.ended.push(id);
            }
          });
        const untilOpened = (_lease: RequestLease, id: string) => {
          const { opened, open } = gate();
          record.gates.set(id, open);
          return opened;
        };
        const untilAborted = (lease: RequestLease) =>
          new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
        for (const [path, guard, until] of [
          ["/held", held, untilOpened],
          ["/ignoring", ignoring, untilOpened],
          ["/heeding", heeding, untilAborted],
        ] as const) {
          const handler = (c: Context) => callback(c, until);
          if (form === "wrap") app.get(path, guard.wrap(handler));
          else app.get(path, guard, handler);
        }
        server = await runtime.start(app);
        return record;
      }

      /** A client that reads the first chunk and leaves; or, refused, reads its answer. */
      async function leaveAfterFirstChunk(path: string, id: string): Promise<number> {
        const call: HonoCall = (server as NonNullable<typeof server>).call(path, { "x-id": id });
        const status = await call.status;
        if (status !== 200) {
          seen.refused++;
          await call.done;
          return status;
        }
        await eventually(() => call.text().includes("first"));
        call.leave();
        return status;
      }

      /** Every permit taken was returned exactly once, and the store holds nothing. */
      async function releasedExactlyOnce(...ids: string[]) {
        const { calls } = seen;
        await eventually(() => calls.semaphoreRelease === calls.semaphoreAcquire - seen.refused);
        expect(calls.semaphoreRelease).toBe(calls.semaphoreAcquire - seen.refused);
        for (const id of ids) expect(await seen.count(id)).toBe(0);
      }

      afterEach(async () => {
        for (const open of seen?.gates.values() ?? []) open();
        await server?.close();
        server = undefined;
      });

      it.each(helpers)(
        "$name: six clients that leave after the first chunk get one callback at a time; the permit returns when it settles, no loss",
        async (helper) => {
          await serve(helper);
          expect(await leaveAfterFirstChunk("/held", "1")).toBe(200);
          await eventually(() => seen.reasons.has("1"));
          expect(seen.reasons.get("1")).toBeInstanceOf(ClientAbortedError);
          const statuses: number[] = [];
          for (const id of ["2", "3", "4", "5", "6"]) statuses.push(await leaveAfterFirstChunk("/held", id));
          expect(statuses).toEqual([503, 503, 503, 503, 503]);
          expect(seen.most).toBe(1);
          expect(await seen.count("held")).toBe(1);

          open("1");
          await eventually(() => seen.ended.includes("1"));
          await eventually(async () => (await seen.count("held")) === 0);
          expect(await leaveAfterFirstChunk("/held", "7")).toBe(200);
          open("7");
          await eventually(() => seen.ended.includes("7"));
          await releasedExactlyOnce("held");
          expect(seen.most).toBe(1);
          expect(seen.losses).toEqual([]);
        },
      );

      it("a callback that ignores the departure keeps its permit until disconnectGraceMs; then it is taken back, reported lost with the departure as cause, and Hono's stream is aborted", async () => {
        await serve(helpers[2] as (typeof helpers)[number]);
        expect(await leaveAfterFirstChunk("/ignoring", "i")).toBe(200);
        await eventually(() => seen.reasons.has("i"));
        expect(await leaveAfterFirstChunk("/ignoring", "j")).toBe(503);
        await eventually(() => seen.losses.length === 1);
        expect(seen.losses[0]?.id).toBe("i");
        expect(seen.losses[0]?.error).toBeInstanceOf(SemaphoreLeaseLostError);
        expect(seen.losses[0]?.error.cause).toBeInstanceOf(ClientAbortedError);
        // Taken back at the grace: the callback is stopped the Hono way too, and the slot is free.
        await eventually(() => seen.honoAborted.has("i"));
        await releasedExactlyOnce("ignoring");
        expect(seen.ended).not.toContain("i");
        expect(await leaveAfterFirstChunk("/ignoring", "k")).toBe(200);
        open("k");
        await eventually(() => seen.ended.includes("k"));
        open("i");
        await eventually(() => seen.ended.includes("i"));
        await releasedExactlyOnce("ignoring");
        expect(seen.losses).toHaveLength(1);
      });

      it("a callback that stops on lease.signal returns the permit when it ends, and that is no loss", async () => {
        await serve(helpers[0] as (typeof helpers)[number]);
        expect(await leaveAfterFirstChunk("/heeding", "h")).toBe(200);
        await eventually(() => seen.ended.includes("h"));
        expect(seen.reasons.get("h")).toBeInstanceOf(ClientAbortedError);
        await releasedExactlyOnce("heeding");
        expect(await leaveAfterFirstChunk("/heeding", "h2")).toBe(200);
        await eventually(() => seen.ended.includes("h2"));
        await releasedExactlyOnce("heeding");
        expect(seen.losses).toEqual([]);
      });
    });
  });
});
