import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import express from "express";
import express4 from "express4";
import request from "supertest";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../../integrations/express/index.js";
import { CHANNELS, memoryStore, semaphore } from "../../../src/index.js";
import type { Store } from "../../../src/store/index.js";
import { eventually, gate } from "../../support/stores.js";
import { listen, type RunningApp } from "../harness.js";

const dir = mkdtempSync(join(tmpdir(), "leasehold-express-"));
const FILE_BYTES = 64 * 1024 * 1024;
const file = join(dir, "big.bin");
writeFileSync(file, Buffer.alloc(FILE_BYTES, 7));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Opens `url` and leaves the response paused: the server can only write what the socket buffers hold. */
function pausedDownload(url: string) {
  let response: IncomingMessage | undefined;
  let received = 0;
  const req = httpRequest(url, (res) => {
    response = res;
    res.pause();
  });
  req.on("error", () => {});
  req.end();
  return {
    started: () => response !== undefined,
    readAll: () => {
      response?.on("data", (chunk: Buffer) => {
        received += chunk.length;
      });
      response?.resume();
    },
    received: () => received,
    cut: () => req.destroy(),
  };
}

describe.each([
  ["Express 5", () => express()],
  ["Express 4", () => express4() as unknown as express.Express],
])("%s: res.sendFile", (_, makeApp) => {
  let store: Store;
  let app: RunningApp;
  let lost: unknown[];
  const onLost = (event: unknown) => lost.push(event);
  const count = () => semaphore({ client: store, limit: 1 }).count("file");

  beforeEach(async () => {
    store = memoryStore();
    lost = [];
    subscribe(CHANNELS.lost, onLost);
    const server = makeApp();
    const guarded = expressSemaphore("file", 1, { client: store, disconnectGraceMs: 60_000 });
    server.get("/file", guarded, (_req, res) => res.sendFile(file));
    server.get("/missing", guarded, (_req, res) => res.sendFile(join(dir, "missing.bin")));
    app = await listen(createServer(server));
  });

  afterEach(async () => {
    unsubscribe(CHANNELS.lost, onLost);
    await app.close();
  });

  it("holds the permit until the file's last byte is sent, then returns it", async () => {
    const download = pausedDownload(`${app.url}/file`);
    await eventually(download.started);
    // 64 MiB do not fit in the socket buffers of a client that does not read.
    expect(await count()).toBe(1);
    expect((await request(app.url).get("/file")).status).toBe(503);
    download.readAll();
    await eventually(() => download.received() === FILE_BYTES);
    await eventually(async () => (await count()) === 0);
    expect(lost).toEqual([]);
  });

  it("a missing file goes to the error path and returns the permit", async () => {
    expect((await request(app.url).get("/missing")).status).toBe(404);
    await eventually(async () => (await count()) === 0);
    expect(lost).toEqual([]);
  });

  // Regression: when the client left mid-file, send stopped streaming but never ended the response,
  // so the permit was held for disconnectGraceMs and then reported as a lost lease (an alert, for a
  // download cut short).
  it("a client that leaves mid-file: the permit returns when the file stream stops, and no loss is reported", async () => {
    const download = pausedDownload(`${app.url}/file`);
    await eventually(download.started);
    expect(await count()).toBe(1);
    download.cut();
    await eventually(async () => (await count()) === 0);
    expect(lost).toEqual([]);
    const next = await request(app.url).get("/missing");
    expect(next.status).toBe(404);
  });
});

describe("Express: stacked middlewares", () => {
  it("the handler sees the innermost lease; a refusal by the inner one returns the outer's permit; both return after", async () => {
    const store = memoryStore();
    const slots = semaphore({ client: store, limit: 5 });
    const { opened, open } = gate();
    let seen: string | undefined;
    const server = express();
    server.get(
      "/",
      expressSemaphore("outer", 5, { client: store }),
      expressSemaphore("inner", 1, { client: store }),
      async (req, res) => {
        seen = req.lease?.key;
        await opened;
        res.end("done");
      },
    );
    const http = createServer(server);
    const first = request(http)
      .get("/")
      .then((res) => res);
    await eventually(() => seen !== undefined);
    expect(seen).toBe("inner");
    const refused = await request(http).get("/");
    expect(refused.status).toBe(503);
    expect(JSON.parse(refused.text)).toMatchObject({ key: "inner" });
    // Only the first request's permits are held: the refused one gave its outer permit back.
    await eventually(async () => (await slots.count("outer")) === 1);
    expect(await slots.count("inner")).toBe(1);
    open();
    expect((await first).text).toBe("done");
    await eventually(async () => (await slots.count("outer")) === 0 && (await slots.count("inner")) === 0);
  });
});
