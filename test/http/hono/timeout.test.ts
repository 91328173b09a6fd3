// A `timeout()` (or any middleware that answers first) between leasehold's guard and the route's
// handler: the limit counts handlers at work, whatever sits between them. Where the guard sees the
// handler end (the handler is wrapped, or comes right after the guard) the permit returns then;
// where it cannot, it keeps the permit until `disconnectGraceMs` and reports the loss, never
// freeing it early (issue #27, defect 6); the loss's message names that cause, not an operator's
// release (found by the adapter model). Over Node (`@hono/node-server`) and `app.fetch`, on the
// embedded store and Redis.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { type Context, type Handler, Hono, type MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { stream } from "hono/streaming";
import { timeout } from "hono/timeout";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type LeaseholdMiddleware, type SemaphoreLease, semaphore } from "../../../integrations/hono/index.js";
import { CHANNELS, semaphore as engine, type ReleasedEvent, SemaphoreLeaseLostError } from "../../../src/index.js";
import { eventually, gate, spyStore } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { type HonoCall, type HonoRuntime, honoRuntimes } from "./runtimes.js";

/** How a route puts the guard and a `timeout()` around its handler. */
type Placement = (app: Hono, guard: LeaseholdMiddleware<SemaphoreLease>, handler: Handler) => void;

const passThrough: MiddlewareHandler = async (_c, next) => {
  await next();
};

/** Each test its own lease id: a permit one leaks cannot refuse the next. */
let serial = 0;

/**
 * One test's app and what it saw, captured by the app's own closures: a handler a failed test left
 * running cannot write into the next test's record.
 */
interface Scene {
  call(id: string, headers?: Record<string, string>): HonoCall;
  /** Opens the gate the handler of request `id` waits at. */
  open(id: string): void;
  entered(id: string): boolean;
  /** The handler's end, the loss and the release, in the order they happened. */
  story: string[];
  losses: Error[];
  working: number;
  most: number;
  /** Acquires refused (they take nothing, so they release nothing). */
  refused: number;
  calls: ReturnType<typeof spyStore>["calls"];
  count(): Promise<number>;
}

describe.each(bothStores)("Hono: a middleware between the guard and the handler, on the $name store", ({ make }) => {
  describe.each(honoRuntimes)("served by $name", (runtime: HonoRuntime) => {
    const cleanups: (() => Promise<void> | void)[] = [];
    let errors: ReturnType<typeof vi.spyOn>;

    async function serve(place: Placement): Promise<Scene> {
      const spied = spyStore(make(), {}, 2_000);
      const client = spied.store;
      const name = `api-${++serial}`;
      const gates = new Map<string, () => void>();
      const scene: Scene = {
        call: (id, headers = {}) => server.call("/api/x", { "x-id": id, ...headers }),
        open: (id) => gates.get(id)?.(),
        entered: (id) => gates.has(id),
        story: [],
        losses: [],
        working: 0,
        most: 0,
        refused: 0,
        calls: spied.calls,
        count: () => engine({ client, limit: 1 }).count(name),
      };
      const onReleased = (event: unknown) => {
        if ((event as ReleasedEvent).id === name) scene.story.push("released");
      };
      subscribe(CHANNELS.released, onReleased);
      const guard = semaphore(name, 1, {
        client,
        disconnectGraceMs: 1_500,
        onLeaseLost: (error) => {
          scene.losses.push(error);
          scene.story.push("lost");
        },
      });
      const handler = async (c: Context) => {
        const id = c.req.header("x-id") ?? "";
        scene.working++;
        scene.most = Math.max(scene.most, scene.working);
        const { opened, open } = gate();
        gates.set(id, open);
        await opened;
        scene.working--;
        scene.story.push(`ended ${id}`);
        if (c.req.header("x-throw") === "1") throw new HTTPException(404, { message: "no such thing" });
        return c.text("done");
      };
      const app = new Hono();
      place(app, guard, handler);
      const server = await runtime.start(app);
      cleanups.push(async () => {
        unsubscribe(CHANNELS.released, onReleased);
        for (const open of gates.values()) open();
        await server.close();
      });
      return scene;
    }

    /** The status of a request whose handler, if it runs, is let go by the test. */
    async function statusOf(scene: Scene, id: string, headers: Record<string, string> = {}): Promise<number> {
      const call = scene.call(id, headers);
      const status = await call.status;
      await call.done.catch(() => {});
      if (status === 503) scene.refused++;
      return status;
    }

    async function releasedExactlyOnce(scene: Scene) {
      const { calls } = scene;
      await eventually(() => calls.semaphoreRelease === calls.semaphoreAcquire - scene.refused);
      expect(calls.semaphoreRelease).toBe(calls.semaphoreAcquire - scene.refused);
      expect(await scene.count()).toBe(0);
    }

    beforeEach(() => {
      errors = vi.spyOn(console, "error");
    });

    afterEach(async () => {
      errors.mockRestore();
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    /**
     * The first request times out (504) while its handler works on (a `timeout()` before the guard
     * may fire before a slow store admitted it: its handler starts then); the next three are
     * refused, and none of their handlers runs.
     */
    async function timedOutThenRefused(scene: Scene) {
      expect(await statusOf(scene, "1")).toBe(504);
      await eventually(() => scene.entered("1"));
      expect(scene.working).toBe(1);
      expect([await statusOf(scene, "2"), await statusOf(scene, "3"), await statusOf(scene, "4")]).toEqual([503, 503, 503]);
      expect(scene.most).toBe(1);
      expect(await scene.count()).toBe(1);
    }

    const seen: [string, Placement][] = [
      [
        "app.use(guard) with guard.wrap(handler) behind the timeout: the wrap takes no second permit and reports the handler's end",
        (app, guard, handler) => {
          app.use("/api/*", guard);
          app.get("/api/x", timeout(100), guard.wrap(handler));
        },
      ],
      ["guard.wrap(handler) behind the timeout", (app, guard, handler) => app.get("/api/x", timeout(100), guard.wrap(handler))],
      ["the guard between the timeout and the handler", (app, guard, handler) => app.get("/api/x", timeout(100), guard, handler)],
    ];

    it.each(seen)("%s: the permit returns when the handler ends, and that is no loss", async (_name, place) => {
      const scene = await serve(place);
      await timedOutThenRefused(scene);
      scene.open("1");
      await eventually(() => scene.story.includes("ended 1"));
      await releasedExactlyOnce(scene);
      expect(scene.story).toEqual(["ended 1", "released"]);
      expect(scene.losses).toEqual([]);
      // One permit per request, even with the guard installed twice on the route.
      expect(scene.calls.semaphoreAcquire - scene.refused).toBe(1);
      expect(errors).not.toHaveBeenCalled();
    });

    it.each(seen.slice(1))(
      "%s, with a stream returned after the timeout answered: Hono drops it unsent; the permit waits for its callback, then returns",
      async (_name, place) => {
        let callbackEnded = false;
        const scene = await serve((app, guard, handler) =>
          place(app, guard, async (c) => {
            await handler(c, async () => {});
            // `stream()`, not `streamSSE()`: on Node the latter sets headers on the 504 already sent, which
            // Hono cannot rebuild, and throws before its callback starts.
            return stream(c, async (s) => {
              await s.write("one");
              await s.write("two");
              callbackEnded = true;
            });
          }),
        );
        await timedOutThenRefused(scene);
        scene.open("1");
        await eventually(() => callbackEnded);
        await releasedExactlyOnce(scene);
        expect(scene.story).toEqual(["ended 1", "released"]);
        expect(scene.losses).toEqual([]);
        expect(errors).not.toHaveBeenCalled();
      },
    );

    it("app.use(guard) with timeout() between it and a plain handler: the guard cannot see the handler end, so it keeps the permit until disconnectGraceMs, then reports it lost with the timeout as cause", async () => {
      const scene = await serve((app, guard, handler) => {
        app.use("/api/*", guard);
        app.get("/api/x", timeout(100), handler);
      });
      await timedOutThenRefused(scene);
      scene.open("1");
      await eventually(() => scene.story.includes("ended 1"));
      // The handler has ended, but nothing told the guard: the permit is still held.
      expect(await statusOf(scene, "5")).toBe(503);
      await eventually(() => scene.story.includes("released"));
      expect(scene.story).toEqual(["ended 1", "lost", "released"]);
      expect(scene.losses).toHaveLength(1);
      expect(scene.losses[0]).toBeInstanceOf(SemaphoreLeaseLostError);
      expect(scene.losses[0]?.cause).toBeInstanceOf(HTTPException);
      expect(scene.losses[0]?.cause).toMatchObject({ status: 504 });
      // Told as what happened: the guard could not see the handler's end, not an operator's release.
      expect(scene.losses[0]?.message).toMatch(/could not see the handler's end/);
      expect(scene.losses[0]?.message).toMatch(/guard\.wrap\(handler\)/);
      expect(scene.losses[0]?.message).not.toMatch(/no longer this holder's/);
      await releasedExactlyOnce(scene);
      expect(errors).not.toHaveBeenCalled();
    });

    it("with a middleware between them that waits for the handler, the guard takes next() for the handler's end: a handler that answers returns its permit at once", async () => {
      const scene = await serve((app, guard, handler) => {
        app.use("/api/*", guard);
        app.get("/api/x", passThrough, handler);
      });
      const call = scene.call("ok");
      await eventually(() => scene.entered("ok"));
      expect(await statusOf(scene, "busy")).toBe(503);
      scene.open("ok");
      expect(await call.status).toBe(200);
      expect(await call.done).toBe("done");
      await releasedExactlyOnce(scene);
      expect(scene.story).toEqual(["ended ok", "released"]);
      expect(scene.losses).toEqual([]);
    });

    it("with a middleware between them, an error answered below the guard leaves it unable to tell the handler ended: held until disconnectGraceMs and reported, as after a timeout", async () => {
      const scene = await serve((app, guard, handler) => {
        app.use("/api/*", guard);
        app.get("/api/x", passThrough, handler);
      });
      const call = scene.call("t", { "x-throw": "1" });
      await eventually(() => scene.entered("t"));
      scene.open("t");
      expect(await call.status).toBe(404);
      await eventually(() => scene.story.includes("released"));
      expect(scene.story).toEqual(["ended t", "lost", "released"]);
      expect(scene.losses[0]?.cause).toBeInstanceOf(HTTPException);
      expect(scene.losses[0]?.cause).toMatchObject({ status: 404 });
      expect(scene.losses[0]?.message).toMatch(/could not see the handler's end/);
      await releasedExactlyOnce(scene);
    });
  });
});
