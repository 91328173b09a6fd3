import { Agent, request as httpRequest } from "node:http";
import { connect } from "node:net";
import request from "supertest";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { eventually, spyStore } from "../support/stores.js";
import { harnesses } from "./frameworks.js";
import { Control, type RunningApp } from "./harness.js";

/** What one socket read: the status line of each response, in order. */
function statuses(raw: string): string[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1] as string);
}

// One socket, several requests: each response object has its own exchange and gives back its own permit.
describe.each(harnesses)("$name adapter: requests sharing a connection", (harness) => {
  let store: Store;
  let calls: ReturnType<typeof spyStore>["calls"];
  let control: Control;
  let app: RunningApp;
  const count = (id: string) => semaphore({ client: store, limit: 2 }).count(id);

  beforeEach(async () => {
    const spied = spyStore(memoryStore());
    store = spied.store;
    calls = spied.calls;
    control = new Control(store);
    app = await harness.start(store, control);
  });

  afterEach(async () => {
    control.openAll();
    await app.close();
  });

  it("pipelined requests on one socket each hold and return their own permit", async () => {
    const { port } = new URL(app.url);
    const socket = connect(Number(port), "127.0.0.1");
    let raw = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      raw += chunk;
    });
    const one = (n: number) => `GET /work HTTP/1.1\r\nHost: test\r\nx-tenant: t${n}\r\nx-id: p${n}\r\n\r\n`;
    socket.write(one(1) + one(2) + one(3));
    // The first is in its handler; the others wait behind it on the socket, or in their own handlers.
    await eventually(() => control.entered.includes("p1"));
    for (let n = 1; n <= 3; n++) {
      await eventually(() => control.entered.includes(`p${n}`));
      control.open(`p${n}`);
    }
    await eventually(() => statuses(raw).length === 3);
    socket.destroy();
    expect(statuses(raw)).toEqual(["200", "200", "200"]);
    for (const tenant of ["t1", "t2", "t3"]) await eventually(async () => (await count(`work:${tenant}`)) === 0);
    await eventually(() => calls.semaphoreRelease === 3);
    expect(calls.semaphoreAcquire).toBe(3);
  });

  it("sequential requests on one kept-alive connection each return their permit", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    try {
      for (let n = 0; n < 5; n++) {
        await new Promise<void>((resolve, reject) => {
          const req = httpRequest(`${app.url}/unfenced`, { agent }, (res) => {
            expect(res.statusCode).toBe(200);
            res.resume();
            res.on("end", resolve);
          });
          req.on("socket", (socket) => sockets.add(socket));
          req.on("error", reject);
          req.end();
        });
        // A kept-alive client sends its next request as soon as it has read the answer.
        await eventually(async () => (await count("unfenced")) === 0);
      }
    } finally {
      agent.destroy();
    }
    expect(sockets.size).toBe(1);
    expect(calls.semaphoreAcquire).toBe(5);
    await eventually(() => calls.semaphoreRelease === 5);
  });

  it("a HEAD request holds its permit while its handler works and returns it after", async () => {
    const head = request(app.url)
      .head("/work")
      .set("x-tenant", "h")
      .set("x-id", "head")
      .then((res) => res);
    await eventually(() => control.entered.includes("head"));
    expect(await count("work:h")).toBe(1);
    control.open("head");
    expect((await head).status).toBe(200);
    await eventually(async () => (await count("work:h")) === 0);
    await eventually(() => calls.semaphoreRelease === 1);
  });
});
