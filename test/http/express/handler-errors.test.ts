// Issue #27, defect 7: an Express (4 and 5) handler that fails after its response started kept its
// permit for disconnectGraceMs and reported a false loss: Express's final handler destroys the socket
// of a started response, which read as a client leaving. The request is over when its handler failed.
// Issue #27, defect 5 (Express): a handler that lets its lease's abort reason propagate (as the docs
// recommend) gets the documented problem response, and leasehold's own errors are not logged as bugs.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import express, { type NextFunction, type Request, type Response } from "express";
import express4 from "express4";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { semaphore as expressSemaphore, type LeaseholdMiddleware, PROBLEM_TYPES } from "../../../integrations/express/index.js";
import type { RequestLease } from "../../../integrations/http/types.js";
import { CHANNELS, semaphore } from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import type { Store } from "../../../src/store/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, spyStore } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { getOnce, listen, type RunningApp } from "../harness.js";

/** Rejects with the signal's reason when it aborts: work that stops when told, as the docs recommend. */
const stopsWhenTold = (signal: AbortSignal): Promise<never> =>
  new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));

const VERSIONS = [
  { name: "Express 5", make: () => express(), asyncThrows: true },
  { name: "Express 4", make: () => express4() as unknown as express.Express, asyncThrows: false },
];

describe.each(VERSIONS)("$name", ({ make, asyncThrows }) => {
  describe.each(bothStores)("on the $name store", ({ make: makeStore }) => {
    let store: Store;
    /** The same store unspied: where a steal goes, so that it is not counted as a release. */
    let raw: Store;
    /** Each test its own keys: a permit a failing test kept must not refuse the next test's requests. */
    let prefix: string;
    let calls: ReturnType<typeof spyStore>["calls"];
    let app: RunningApp | undefined;
    let lost: unknown[];
    let entered: string[];
    let leases: RequestLease[];
    const onLost = (event: unknown) => lost.push(event);
    const count = (id: string) => semaphore({ client: store, limit: 1, prefix }).count(id);

    beforeEach(() => {
      raw = makeStore();
      const spied = spyStore(raw, {}, 2_000);
      store = spied.store;
      calls = spied.calls;
      prefix = uniquePrefix("handler-errors");
      lost = [];
      entered = [];
      leases = [];
      subscribe(CHANNELS.lost, onLost);
    });

    afterEach(async () => {
      unsubscribe(CHANNELS.lost, onLost);
      vi.restoreAllMocks();
      await app?.close();
      app = undefined;
    });

    /** Every permit taken was given back exactly once. */
    const releasedOnceEach = async () => {
      await eventually(() => calls.semaphoreRelease === calls.semaphoreAcquire);
      expect(calls.semaphoreRelease).toBe(calls.semaphoreAcquire);
    };

    describe("issue #27, defect 7: a handler that fails after its response started", () => {
      // Ways a handler fails once it has written: through next(err) at once, from a callback, and
      // (Express 5, which passes a rejected handler promise to next) by throwing in an async handler.
      const failures: [string, (req: Request, res: Response, next: NextFunction) => unknown][] = [
        [
          "calls next(err)",
          (_req, res, next) => {
            res.write("x");
            next(new Error("upstream failed"));
          },
        ],
        [
          "calls next(err) from a callback",
          (_req, res, next) => {
            res.write("x");
            setImmediate(() => next(new Error("upstream failed")));
          },
        ],
      ];
      if (asyncThrows) {
        failures.push([
          "throws in an async handler",
          async (_req, res) => {
            res.write("x");
            await Promise.resolve();
            throw new Error("upstream failed");
          },
        ]);
      }

      it.each(failures)("that %s returns its permit at once, and reports no loss", async (_, handler) => {
        // A grace far longer than the test: a permit kept for it shows as a 503 below.
        const guarded = expressSemaphore("fails", 1, { client: store, prefix, disconnectGraceMs: 60_000 });
        const server = make();
        server.get("/fail", guarded, handler as express.RequestHandler);
        server.get("/ok", guarded, (_req, res) => void res.json({ ok: true }));
        app = await listen(createServer(server));

        const failed = await getOnce(`${app.url}/fail`).answer;
        // Express's final handler cuts a started response: the client must not take it for a whole one.
        expect(failed.complete).toBe(false);
        await eventually(async () => (await count("fails")) === 0);
        const next = await getOnce(`${app.url}/ok`).answer;
        expect(next).toMatchObject({ status: 200, body: '{"ok":true}', complete: true });
        await releasedOnceEach();
        expect(calls.semaphoreAcquire).toBe(2);
        expect(lost).toEqual([]);
      });

      it("that fails before its response started is answered by Express as before, and returns its permit once", async () => {
        const guarded = expressSemaphore("fails", 1, { client: store, prefix, disconnectGraceMs: 60_000 });
        const server = make();
        server.get("/fail", guarded, (_req, _res, next) => next(Object.assign(new Error("not found"), { status: 404 })));
        app = await listen(createServer(server));

        expect(await getOnce(`${app.url}/fail`).answer).toMatchObject({ status: 404, complete: true });
        await eventually(async () => (await count("fails")) === 0);
        await releasedOnceEach();
        expect(lost).toEqual([]);
      });

      it("in a Router and in a mounted sub-app returns its permit at once, and reports no loss", async () => {
        const guarded = expressSemaphore("fails", 1, { client: store, prefix, disconnectGraceMs: 60_000 });
        const fail: express.RequestHandler = (_req, res, next) => {
          res.write("x");
          next(new Error("upstream failed"));
        };
        const router = express.Router();
        router.get("/fail", guarded, fail);
        const sub = make();
        sub.get("/fail", guarded, fail);
        const server = make();
        server.use("/router", router);
        server.use("/sub", sub);
        server.get("/ok", guarded, (_req, res) => void res.json({ ok: true }));
        app = await listen(createServer(server));

        for (const path of ["/router/fail", "/sub/fail"]) {
          expect((await getOnce(`${app.url}${path}`).answer).complete).toBe(false);
          await eventually(async () => (await count("fails")) === 0);
          expect(await getOnce(`${app.url}/ok`).answer).toMatchObject({ status: 200, complete: true });
        }
        await releasedOnceEach();
        expect(calls.semaphoreAcquire).toBe(4);
        expect(lost).toEqual([]);
      });

      it("whose client had left returns its permit when it fails, not after the grace, and reports no loss", async () => {
        const guarded = expressSemaphore("fails", 1, { client: store, prefix, disconnectGraceMs: 60_000 });
        const server = make();
        server.get("/fail", guarded, (req, res, next) => {
          res.write("x");
          entered.push("fail");
          req.lease?.signal.addEventListener("abort", () => next(new Error("upstream failed")), { once: true });
        });
        app = await listen(createServer(server));

        const leaving = getOnce(`${app.url}/fail`);
        await eventually(() => entered.length === 1);
        leaving.leave();
        await eventually(async () => (await count("fails")) === 0);
        await releasedOnceEach();
        expect(lost).toEqual([]);
      });
    });

    describe("issue #27, defect 5: leasehold's own abort reasons, propagated by the handler", () => {
      let logged: unknown[];
      /** The errors the app's own error middleware saw (and passed on), in order. */
      let failures: unknown[];

      beforeEach(() => {
        logged = [];
        failures = [];
        vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
          logged.push(args);
        });
      });

      /**
       * An app whose `/work` waits on its lease's signal and lets the reason propagate: as an async
       * handler's rejection in Express 5, through next(err) in Express 4. `timer` waits on a
       * `timers/promises` timer instead, which rejects with an AbortError whose cause is the reason.
       */
      async function start(guarded: LeaseholdMiddleware): Promise<RunningApp> {
        const server = make();
        // Express logs the errors that reach its final handler, except under NODE_ENV=test.
        server.set("env", "development");
        const work = (signal: AbortSignal, timer: boolean) =>
          timer ? sleep(60_000, undefined, { signal }) : stopsWhenTold(signal);
        for (const timer of [false, true]) {
          const path = timer ? "/timer" : "/work";
          if (asyncThrows) {
            server.get(path, guarded, async (req, res) => {
              entered.push(path);
              leases.push(req.lease!);
              res.json(await work(req.lease!.signal, timer));
            });
          } else {
            server.get(path, guarded, (req, res, next) => {
              entered.push(path);
              leases.push(req.lease!);
              work(req.lease!.signal, timer).then((value) => res.json(value), next);
            });
          }
        }
        // An error middleware of the app's own that passes every error on, as a logging one would.
        server.use((error: unknown, _req: Request, _res: Response, next: NextFunction) => {
          failures.push(error);
          next(error);
        });
        return listen(createServer(server));
      }

      /**
       * Resolves once the handler's error has gone through the rest of the app: Express calls its
       * final handler on the turn after the last middleware, and that logs on the turn after it ran.
       */
      async function errorHandled(): Promise<void> {
        await eventually(() => failures.length === 1);
        for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
      }

      it.each(["/work", "/timer"])("%s: a ShutdownError is answered 503 shutting-down, not logged", async (path) => {
        const guarded = expressSemaphore("closing", 1, { client: store, prefix });
        app = await start(guarded);
        const pending = getOnce(`${app.url}${path}`).answer;
        await eventually(() => entered.length === 1);
        const closed = guarded.close({ graceMs: 60_000 });
        const answer = await pending;
        expect(answer).toMatchObject({ status: 503, complete: true });
        expect(answer.headers["content-type"]).toMatch(/^application\/problem\+json/);
        expect(answer.headers["retry-after"]).toBe("1");
        expect(JSON.parse(answer.body)).toMatchObject({ type: PROBLEM_TYPES["shutting-down"], status: 503, key: "closing" });
        // The permit came back with the answer, long before the grace.
        await closed;
        expect(await count("closing")).toBe(0);
        await releasedOnceEach();
        expect(lost).toEqual([]);
        await errorHandled();
        expect(logged).toEqual([]);
      });

      it("a lease lost before the response started is answered 503 lease-lost, once, and not logged as a bug", async () => {
        const guarded = expressSemaphore("lost", 1, { client: store, prefix, heartbeatMs: 20 });
        app = await start(guarded);
        const pending = getOnce(`${app.url}/work`).answer;
        await eventually(() => entered.length === 1);
        // Removed behind its holder's back (an operator, an eviction): its next renewal finds it gone.
        await raw.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "lost"), token: leases[0]!.token });
        const answer = await pending;
        expect(answer).toMatchObject({ status: 503, complete: true });
        expect(JSON.parse(answer.body)).toMatchObject({ type: PROBLEM_TYPES["lease-lost"], key: "lost" });
        await releasedOnceEach();
        // A real loss: reported once, and only as a loss.
        expect(lost).toHaveLength(1);
        await errorHandled();
        expect(logged).toEqual([]);
      });

      it("a ClientAbortedError needs no answer: the permit returns at once, nothing is reported or logged", async () => {
        const guarded = expressSemaphore("gone", 1, { client: store, prefix, disconnectGraceMs: 60_000 });
        app = await start(guarded);
        const leaving = getOnce(`${app.url}/work`);
        await eventually(() => entered.length === 1);
        leaving.leave();
        await eventually(async () => (await count("gone")) === 0);
        await releasedOnceEach();
        expect(lost).toEqual([]);
        await errorHandled();
        expect(logged).toEqual([]);
      });
    });
  });
});
