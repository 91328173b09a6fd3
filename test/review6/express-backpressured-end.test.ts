// Review 6 (perf-http, b1fa498), the case the 'prefinish' fix does not cover: a middleware that
// replaced `res.end` (capturing the original) before leasehold ran and streams the body itself, as compression does (the
// handler's `res.end(body)` goes into zlib; the data is written as the socket drains; the captured
// `end` runs when zlib ends). A client that stops reading and leaves mid-body leaves that stream
// paused for good: the real `end` never runs, so no wrapper installed at the departure and no event
// sees the handler's end. The handler is done, yet its permit is held for the whole
// `disconnectGraceMs` (30 s by default) and then reported as a lost lease: with a common middleware,
// every download a client abandons raises a false loss alert and blocks a permit. Before b1fa498,
// leasehold's own `end` (installed when its middleware ran) was the one the handler called: the
// permit came back as soon as the client left. The order matters: compression is usually mounted
// app-wide, before the route's leasehold middleware, so leasehold used to wrap compression's `end`.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import express from "express";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../integrations/express/index.js";
import { CHANNELS, memoryStore, semaphore } from "../../src/index.js";
import { listen, type RunningApp } from "../http/harness.js";
import { eventually } from "../support/stores.js";

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
