// A middleware before the guard, such as a request timeout, ends a request by calling next(err)
// (issue #27, defect 7 and what fixing it found). A request it ends while queued never runs its
// handler: its permit, when granted, goes straight back. A request it ends while the handler works
// gives its permit back with the response, as every finished response does (Express cannot see the
// handler's end), so the handler is told at once through lease.signal, with the error that ended it.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer } from "node:http";
import express, { type NextFunction, type Request, type Response } from "express";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../../integrations/express/index.js";
import { CHANNELS, type ReleasedEvent, semaphore } from "../../../src/index.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, spyStore } from "../../support/stores.js";
import { bothStores } from "../frameworks.js";
import { getOnce, listen, type RunningApp } from "../harness.js";

describe.each(bothStores)("Express, a request a middleware before the guard ends, on the $name store", ({ make }) => {
  let app: RunningApp | undefined;
  let released: ReleasedEvent[] = [];
  const onReleased = (event: unknown) => {
    if ((event as ReleasedEvent).name === "slow") released.push(event as ReleasedEvent);
  };
  beforeEach(() => {
    released = [];
    subscribe(CHANNELS.released, onReleased);
  });
  afterEach(async () => {
    unsubscribe(CHANNELS.released, onReleased);
    await app?.close();
    app = undefined;
  });

  it("never runs its handler, and its permit, once granted, goes back at once", async () => {
    const { store, calls } = spyStore(make(), {}, 2_000);
    const prefix = uniquePrefix("queued-ended");
    const guarded = expressSemaphore("slow", 1, { client: store, prefix, waitMs: 5_000 });
    const entered: string[] = [];
    let releaseFirst: () => void = () => {};
    const firstMayEnd = new Promise<void>((resolve) => {
      releaseFirst = resolve;
    });
    const server = express();
    // As a request timeout does: fails the second request while it waits, from a timer.
    server.use((req: Request, _res: Response, next: NextFunction) => {
      if (req.query.who === "second") setTimeout(() => next(new Error("request timed out")), 100);
      next();
    });
    server.get("/work", guarded, async (req, res) => {
      entered.push(String(req.query.who));
      if (req.query.who === "first") await firstMayEnd;
      res.json({ ok: true });
    });
    server.use((_error: unknown, _req: Request, res: Response, _next: NextFunction) => {
      if (!res.headersSent) res.status(504).json({ timedOut: true });
    });
    app = await listen(createServer(server));

    const first = getOnce(`${app.url}/work?who=first`).answer;
    await eventually(() => entered.length === 1);
    const second = await getOnce(`${app.url}/work?who=second`).answer;
    expect(second.status).toBe(504);
    // The first ends: the second's turn comes, but its request is over.
    releaseFirst();
    expect((await first).status).toBe(200);
    // Both leases given back: the second's grant has come and gone, and with it any call of its handler.
    await eventually(() => released.length === 2);
    expect(entered).toEqual(["first"]);
    expect(await semaphore({ client: store, limit: 1, prefix }).count("slow")).toBe(0);
    expect(calls.semaphoreRelease).toBeGreaterThanOrEqual(1);
  });

  it("while its handler works: the handler's signal aborts with the middleware's error, and the permit comes back", async () => {
    const prefix = uniquePrefix("ended-at-work");
    const store = make();
    const guarded = expressSemaphore("slow", 1, { client: store, prefix });
    const timedOut = new Error("request timed out");
    const told: unknown[] = [];
    const server = express();
    server.use((_req: Request, _res: Response, next: NextFunction) => {
      setTimeout(() => next(timedOut), 100);
      next();
    });
    server.get("/work", guarded, async (req) => {
      const signal = req.lease!.signal;
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      // Told, it stops: the answer is Express's.
      told.push(signal.reason);
    });
    // The error goes on to Express's own answer, past the app's error handling, where the guard sees it.
    server.use((error: unknown, _req: Request, _res: Response, next: NextFunction) => next(error));
    app = await listen(createServer(server));

    const answer = await getOnce(`${app.url}/work`).answer;
    expect(answer.status).toBe(500);
    await eventually(() => told.length === 1 && released.length === 1);
    expect(told).toEqual([timedOut]);
    expect(await semaphore({ client: store, limit: 1, prefix }).count("slow")).toBe(0);
  });
});
