// A stream a Hono handler makes once the guard is done with its response is never sent: its lease
// was lost and the loss answered 503 while the handler worked on, or a `timeout()` between guard
// and handler answered first. Its callback must not wait on its first write forever: it is told
// (the stream is cancelled, `onAbort` runs, writes return) once its lease is gone, or read to its
// end while the guard still keeps the permit. Found by the adapter model (issue #27,
// test/model/adapter.test.ts); on the embedded store and Redis, over `@hono/node-server` and `app.fetch`.
import { type Context, type Handler, Hono } from "hono";
import { stream } from "hono/streaming";
import { timeout } from "hono/timeout";
import { afterEach, describe, expect, it } from "vitest";
import { type LeaseholdMiddleware, type SemaphoreLease, semaphore } from "../../../integrations/hono/index.js";
import { semaphore as engine } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { Store } from "../../../src/store/index.js";
import { eventually } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { type HonoRuntime, honoRuntimes } from "./runtimes.js";

type Placement = (app: Hono, guard: LeaseholdMiddleware<SemaphoreLease>, handler: Handler) => void;

const placements: { name: string; place: Placement }[] = [
  { name: "guard, handler", place: (app, guard, handler) => app.get("/x", guard, handler) },
  { name: "guard.wrap(handler)", place: (app, guard, handler) => app.get("/x", guard.wrap(handler)) },
  { name: "guard, timeout(), handler", place: (app, guard, handler) => app.get("/x", guard, timeout(5_000), handler) },
];

let serial = 0;

/** What the stream callback did: its writes returned, it was told of an abort, it settled. */
class Callback {
  writes = 0;
  aborted = false;
  settled = false;
}

describe.each(bothStores)("Hono: a stream made after the guard is done with the response, on the $name store", ({ make }) => {
  describe.each(honoRuntimes)("served by $name", (runtime: HonoRuntime) => {
    const stops: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const stop of stops.splice(0)) await stop();
    });

    /** An app whose handler, once `proceed` resolves, returns a `stream()` that writes twice. */
    async function serve(store: Store, place: Placement, options: { graceMs: number; timeoutMs?: number }) {
      const name = `dropped-${++serial}`;
      const callback = new Callback();
      let lease: SemaphoreLease | undefined;
      let proceed!: () => void;
      const proceeding = new Promise<void>((resolve) => {
        proceed = resolve;
      });
      const guard = semaphore(name, 1, { client: store, heartbeatMs: 20, disconnectGraceMs: options.graceMs });
      const handler: Handler = async (c: Context) => {
        lease = c.get("lease") as SemaphoreLease;
        await proceeding;
        return stream(c, async (body) => {
          body.onAbort(() => {
            callback.aborted = true;
          });
          await body.write("a");
          callback.writes++;
          await body.write("b");
          callback.writes++;
          callback.settled = true;
        });
      };
      const app = new Hono();
      if (options.timeoutMs === undefined) place(app, guard, handler);
      else app.get("/x", guard, timeout(options.timeoutMs), handler);
      const server = await runtime.start(app);
      stops.push(() => server.close());
      return {
        name,
        callback,
        call: () => server.call("/x"),
        lease: () => lease,
        proceed,
        count: () => engine({ client: store, limit: 1 }).count(name),
      };
    }

    it.each(placements)(
      "[$name] a lease lost while the handler works: its late stream is cancelled, its callback told and settled",
      async ({ place }) => {
        const store = make();
        const scene = await serve(store, place, { graceMs: 60_000 });
        const call = scene.call();
        await eventually(() => scene.lease() !== undefined);
        const lease = scene.lease() as SemaphoreLease;
        // Freed behind its holder's back (an operator): the next renewal finds it gone, and the guard answers 503.
        await store.semaphore.release({ storeKey: storeKey("semaphore", "semaphore", scene.name), token: lease.token });
        expect(await call.status).toBe(503);
        expect(lease.signal.aborted).toBe(true);
        // The handler ignored its signal and returns its stream now: nobody will read it.
        scene.proceed();
        await eventually(() => scene.callback.settled, 2_000);
        expect(scene.callback.aborted).toBe(true);
        expect(await scene.count()).toBe(0);
      },
    );

    it("behind a timeout() that answered first: the late stream is read to its end while the guard keeps the permit", async () => {
      const store = make();
      const scene = await serve(store, placements[2]!.place, { graceMs: 60_000, timeoutMs: 50 });
      const call = scene.call();
      expect(await call.status).toBe(504);
      // The guard cannot see the handler's end: the permit is kept for it.
      expect(await scene.count()).toBe(1);
      scene.proceed();
      await eventually(() => scene.callback.settled, 2_000);
      expect(scene.callback.writes).toBe(2);
      expect(scene.callback.aborted).toBe(false);
      expect(await scene.count()).toBe(1);
    });
  });
});
