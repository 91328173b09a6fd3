// Express: leasehold wraps `res.end` when its middleware runs, before the handler, not only once the
// client has left (integrations/http/node-response.ts). Wrapping only at the client's departure is a
// regression these two cases pin: another middleware hides the handler's end from leasehold, and the
// permit is held for the whole `disconnectGraceMs` (30 s by default; 60 s here) although the handler
// is done, then a *lease lost* is reported for a request that completed.
//
// 1. A middleware mounted after leasehold that captures `res.end` at its own setup and calls the
// captured original later (compression does this: the real end runs when zlib flushes;
// express-session when the session is saved). The client leaves between the handler's `res.end`
// and that deferred real end: the deferred end goes through leasehold's wrapper.
//
// 2. A middleware that replaced `res.end` (capturing the original) before leasehold ran and streams
// the body itself, as compression does (the handler's `res.end(body)` goes into zlib; the data is
// written as the socket drains; the captured `end` runs when zlib ends). A client that stops
// reading and leaves mid-body leaves that stream paused for good: the real `end` never runs, so only
// leasehold's own `end`, the one the handler calls, sees the handler's end. With a common
// middleware, every download a client abandons would otherwise raise a false loss alert and block a
// permit. The order matters: compression is usually mounted app-wide, before the route's leasehold
// middleware.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import express from "express";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../../integrations/express/index.js";
import { CHANNELS, memoryStore, semaphore } from "../../../src/index.js";
import { eventually } from "../../support/stores.js";
import { listen, type RunningApp } from "../harness.js";

// Two cases of one regression: the handler's end, hidden from leasehold by another middleware.
const BODY = Buffer.alloc(32 * 1024 * 1024, 7);
let app: RunningApp | undefined;
const lost: unknown[] = [];
const onLost = (event: unknown) => lost.push(event);
afterEach(async () => {
  unsubscribe(CHANNELS.lost, onLost);
  await app?.close();
});

describe("Express: a body streamed by a middleware that captured end (compression's pattern)", () => {
  it("a client that stops reading and leaves: the permit returns, and no loss is reported", async () => {
    subscribe(CHANNELS.lost, onLost);
    const store = memoryStore();
    const count = () => semaphore({ client: store, limit: 1 }).count("dl");
    const server = express();
    // App-level, as `app.use(compression())` usually is: it runs before the route's leasehold middleware.
    server.use((_req, res, next) => {
      const write = res.write as (chunk: Buffer) => boolean;
      const end = res.end as (...args: unknown[]) => ServerResponse;
      res.end = ((body: Buffer) => {
        // Written in 64 KiB pieces as the socket drains, then the captured end.
        let at = 0;
        const pump = (): void => {
          while (at < body.length) {
            const ok = write.call(res, body.subarray(at, at + 65_536));
            at += 65_536;
            if (!ok) {
              res.once("drain", pump);
              return;
            }
          }
          end.call(res);
        };
        pump();
        return res;
      }) as typeof res.end;
      next();
    });
    server.get("/dl", expressSemaphore("dl", 1, { client: store, disconnectGraceMs: 60_000 }), (_req, res) => {
      res.end(BODY);
    });
    app = await listen(createServer(server));
    let response: IncomingMessage | undefined;
    const client = httpRequest(`${app.url}/dl`, (res) => {
      response = res;
      res.pause();
    });
    client.on("error", () => {});
    client.end();
    await eventually(() => response !== undefined);
    expect(await count()).toBe(1);
    client.destroy();
    // The handler ended long ago; the grace is 60 s.
    await eventually(async () => (await count()) === 0, 3_000);
    expect(lost).toEqual([]);
  });
});

describe("Express: an end deferred by a later middleware, client gone in between", () => {
  it("returns the permit when the deferred end runs, and reports no loss", async () => {
    subscribe(CHANNELS.lost, onLost);
    const store = memoryStore();
    const count = () => semaphore({ client: store, limit: 1 }).count("work");
    let handlerEnded!: () => void;
    const ended = new Promise<void>((resolve) => {
      handlerEnded = resolve;
    });
    let clientGone!: () => void;
    const gone = new Promise<void>((resolve) => {
      clientGone = resolve;
    });
    let realEnd: (() => void) | undefined;
    const server = express();
    server.get(
      "/work",
      expressSemaphore("work", 1, { client: store, disconnectGraceMs: 60_000 }),
      // As compression / express-session: the original `end`, captured now, is called later.
      (_req, res, next) => {
        const original = res.end as (...args: unknown[]) => ServerResponse;
        res.on("close", () => clientGone());
        res.end = ((...args: unknown[]) => {
          realEnd = () => original.apply(res, args);
          handlerEnded();
          return res;
        }) as typeof res.end;
        next();
      },
      (_req, res) => {
        res.end("done");
      },
    );
    app = await listen(createServer(server));
    const client = httpRequest(`${app.url}/work`);
    client.on("error", () => {});
    client.end();
    await ended;
    expect(await count()).toBe(1);
    client.destroy();
    await gone;
    (realEnd as () => void)();
    // The handler and every middleware are done: the permit must come back well before the 60 s grace.
    await eventually(async () => (await count()) === 0, 3_000);
    expect(lost).toEqual([]);
  });
});
