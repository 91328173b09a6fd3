import type { Server } from "node:http";
import { request as httpRequest } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import { type Context, Hono } from "hono";
import { streamSSE, streamText } from "hono/streaming";
import request from "supertest";
import { describe, expect, it } from "vitest";
import { semaphore as honoSemaphore, LeaseRejectedException } from "../../../integrations/hono/index.js";
import { ClientAbortedError, memoryStore, SemaphoreLeaseLostError, semaphore } from "../../../src/index.js";
import { eventually, gate } from "../../support/stores.js";
import { Control, listen } from "../harness.js";
import { buildHonoApp } from "../hono-app.js";

// Off Node (Bun, Deno, Workers) there is no ServerResponse to watch: the adapter wraps the body
// stream instead. app.request() exercises exactly that path, in process.
// Both forms: the middleware before the handler, and the guard as one handler (`wrap`).
describe.each([
  ["middleware", false],
  ["wrap", true],
])("Hono adapter without a Node response (fetch runtimes), %s", (_form, wrapped) => {
  const setup = () => {
    const store = memoryStore();
    const control = new Control(store);
    const app = buildHonoApp(store, control, wrapped);
    const count = (id: string) => semaphore({ client: store, limit: 1 }).count(id);
    return { app, control, count };
  };

  it("holds the permit until the streamed body's last byte", async () => {
    const { app, control, count } = setup();
    const res = await app.request("/stream", { headers: { "x-id": "s" } });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    expect(decoder.decode((await reader.read()).value)).toBe("first\n");
    expect(await count("stream")).toBe(1);
    expect((await app.request("/stream", { headers: { "x-id": "s2" } })).status).toBe(503);
    control.open("s");
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += decoder.decode(chunk.value);
    expect(rest).toBe("second\n");
    await eventually(async () => (await count("stream")) === 0);
  });

  it("a reader that cancels mid-stream leaves the permit with the stream's callback until it settles (issue #27, defect 3)", async () => {
    const { app, control, count } = setup();
    const res = await app.request("/stream", { headers: { "x-id": "c" } });
    const reader = res.body!.getReader();
    await reader.read();
    expect(await count("stream")).toBe(1);
    await reader.cancel();
    await eventually(() => control.reasons.has("c"));
    expect(control.reasons.get("c")).toBeInstanceOf(ClientAbortedError);
    // The callback still works: the permit is its.
    expect(await count("stream")).toBe(1);
    expect((await app.request("/stream", { headers: { "x-id": "c2" } })).status).toBe(503);
    control.open("c");
    await eventually(async () => (await count("stream")) === 0);
    expect(control.lostHook).toEqual([]);
  });

  it("a request whose client aborts keeps its permit while the handler works on, and returns it when the handler settles", async () => {
    const { app, control, count } = setup();
    const client = new AbortController();
    const first = app.request("/linger", { headers: { "x-id": "l1" }, signal: client.signal });
    await eventually(() => control.entered.includes("l1"));
    client.abort();
    await eventually(() => control.reasons.has("l1"));
    expect(control.reasons.get("l1")).toBeInstanceOf(ClientAbortedError);
    expect((await app.request("/linger", { headers: { "x-id": "l2" } })).status).toBe(503);
    expect(control.entered).not.toContain("l2");
    control.open("l1");
    await first;
    await eventually(async () => (await count("linger")) === 0);
    expect(control.lostHook).toEqual([]);
  });

  it("a handler that ignores the abort and never settles loses its permit after disconnectGraceMs, reported once", async () => {
    const { app, control, count } = setup();
    const client = new AbortController();
    void app.request("/abandon", { headers: { "x-id": "a1" }, signal: client.signal });
    await eventually(() => control.entered.includes("a1"));
    client.abort();
    await eventually(async () => (await count("abandon")) === 0);
    expect(control.lostHook).toEqual([{ id: "a1", error: expect.any(SemaphoreLeaseLostError) }]);
    control.openAll();
  });

  it("a request aborted during an earlier middleware is not admitted", async () => {
    const { app, control, count } = setup();
    const client = new AbortController();
    const pending = app.request("/late", { headers: { "x-id": "gone" }, signal: client.signal });
    await eventually(() => control.entered.includes("before:gone"));
    client.abort();
    control.open("before:gone");
    let status: number | undefined;
    void Promise.resolve(pending).then((res) => {
      status = res.status;
    });
    await eventually(() => status !== undefined || control.entered.includes("gone"));
    expect(control.entered).not.toContain("gone");
    expect(status).toBe(499);
    expect(await count("late")).toBe(0);
  });

  it("a handler that releases its lease early is answered in full", async () => {
    const { app, control, count } = setup();
    const pending = app.request("/early", { headers: { "x-id": "e" } });
    await eventually(() => control.entered.includes("e"));
    expect(await count("early")).toBe(0);
    // Well past the lease (200 ms): a lease still kept after the early release would be found lapsed.
    await new Promise((resolve) => setTimeout(resolve, 600));
    control.open("e");
    expect(await (await pending).json()).toEqual({ released: true });
    expect(control.lostHook).toEqual([]);
  });

  it("returns the permit of a plain response once it is read", async () => {
    const { app, control, count } = setup();
    const pending = app.request("/work", { headers: { "x-tenant": "a", "x-id": "w" } });
    await eventually(() => control.entered.includes("w"));
    control.open("w");
    const res = await pending;
    expect(await res.json()).toEqual({ key: "work:a", limit: 2 });
    await eventually(async () => (await count("work:a")) === 0);
  });

  // Issue #27: off Node a response's body is the only sign the response is over. One dropped unread
  // keeps its permit (docs/adapters.md: read or cancel every response); cancelling it returns it.
  it("a plain response left unread keeps its permit until its body is cancelled", async () => {
    const { app, control, count } = setup();
    const pending = app.request("/work", { headers: { "x-tenant": "a", "x-id": "u" } });
    await eventually(() => control.entered.includes("u"));
    control.open("u");
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await count("work:a")).toBe(1);
    await res.body?.cancel();
    await eventually(async () => (await count("work:a")) === 0);
    expect(control.lostHook).toEqual([]);
  });

  it("a refusal is an answer: its exception carries no stack trace, and getResponse() is the problem response", async () => {
    const store = memoryStore();
    await semaphore({ client: store, limit: 1 }).acquire("busy");
    const thrown: unknown[] = [];
    const app = new Hono();
    app.get("/", honoSemaphore("busy", 1, { client: store }), (c) => c.text("in"));
    app.onError((error) => {
      thrown.push(error);
      return (error as LeaseRejectedException).getResponse();
    });
    const res = await app.request("/");
    expect(res.status).toBe(503);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(((await res.json()) as { type: string }).type).toBe("urn:leasehold:problem:semaphore-full");
    expect(thrown[0]).toBeInstanceOf(LeaseRejectedException);
    expect((thrown[0] as Error).stack).not.toMatch(/\n\s+at /);
  });

  it("tenants and the fence work off Node too: 429 for a tenant at its cap, Lease-Fence on the answer", async () => {
    const { app, control, count } = setup();
    const first = app.request("/tenants", { headers: { "x-tenant": "acme", "x-id": "a1" } });
    const second = app.request("/tenants", { headers: { "x-tenant": "acme", "x-id": "a2" } });
    await eventually(() => control.entered.length === 2);
    const capped = await app.request("/tenants", { headers: { "x-tenant": "acme" } });
    expect(capped.status).toBe(429);
    expect(capped.headers.get("retry-after")).toMatch(/^[1-9]\d*$/);
    expect(await capped.json()).toMatchObject({ type: "urn:leasehold:problem:tenant-full", tenant: "acme", limit: 2 });
    control.openAll();
    for (const res of [await first, await second]) {
      const body = (await res.json()) as { fence: number; tenant: string };
      expect(body.tenant).toBe("acme");
      expect(res.headers.get("lease-fence")).toBe(String(body.fence));
    }
    await eventually(async () => (await count("tenants")) === 0);
  });

  it("Lease-Fence reaches a response whose headers are immutable (Response.redirect), and the permit returns", async () => {
    const store = memoryStore();
    const app = new Hono();
    app.get("/", honoSemaphore("redirect", 1, { client: store, exposeFence: true }), () =>
      Response.redirect("https://example.com/", 302),
    );
    const res = await app.request("/");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("https://example.com/");
    expect(res.headers.get("lease-fence")).toMatch(/^[1-9]\d*$/);
    await eventually(async () => (await semaphore({ client: store, limit: 1 }).count("redirect")) === 0);
  });

  // Regression: Hono answers HEAD by running the GET route and dropping its body unread, so a
  // permit held until that body's end was never returned (and kept renewed): every later request 503.
  it("a HEAD request returns its permit when its handler has settled, off Node as on it", async () => {
    const { app, control, count } = setup();
    const head = app.request("/work", { method: "HEAD", headers: { "x-tenant": "a", "x-id": "h" } });
    await eventually(() => control.entered.includes("h"));
    expect(await count("work:a")).toBe(1);
    control.open("h");
    const res = await head;
    expect(res.status).toBe(200);
    expect(res.body).toBeNull();
    await eventually(async () => (await count("work:a")) === 0);
  });

  it("a HEAD request to a streamed route: nobody will read the stream, as after a departure; the permit returns when its callback settles", async () => {
    const { app, control, count } = setup();
    const res = await app.request("/stream", { method: "HEAD", headers: { "x-id": "h" } });
    expect(res.status).toBe(200);
    // Told as a client that left after the headers; its callback still works meanwhile.
    await eventually(() => control.reasons.has("h"));
    expect(control.reasons.get("h")).toBeInstanceOf(ClientAbortedError);
    expect(await count("stream")).toBe(1);
    control.open("h");
    await eventually(async () => (await count("stream")) === 0);
    const next = await app.request("/stream", { headers: { "x-id": "next" } });
    expect(next.status).toBe(200);
    const text = next.text();
    await eventually(() => control.entered.includes("next"));
    control.open("next");
    expect(await text).toBe("first\nsecond\n");
    await eventually(async () => (await count("stream")) === 0);
  });
});

describe("Hono streaming helpers (streamText, streamSSE), on Node and off it", () => {
  const build = (store: ReturnType<typeof memoryStore>, opened: Promise<void>, departures: unknown[] = []) => {
    const app = new Hono();
    const told = (c: Context) =>
      c.get("lease")?.signal.addEventListener("abort", () => departures.push(c.get("lease")?.signal.reason));
    app.get("/text", honoSemaphore("text", 1, { client: store }), (c) =>
      streamText(c, async (body) => {
        told(c);
        await body.write("first\n");
        await opened;
        await body.write("second\n");
      }),
    );
    app.get("/sse", honoSemaphore("sse", 1, { client: store }), (c) =>
      streamSSE(c, async (body) => {
        told(c);
        await body.writeSSE({ data: "first" });
        await opened;
        await body.writeSSE({ data: "second" });
      }),
    );
    return app;
  };

  it.each(["text", "sse"])(
    "/%s over Node: held until the last byte; a client that leaves mid-stream leaves it with the callback until that settles",
    async (route) => {
      const store = memoryStore();
      const count = () => semaphore({ client: store, limit: 1 }).count(route);
      const { opened, open } = gate();
      const running = await listen(createAdaptorServer({ fetch: build(store, opened).fetch }) as Server);
      try {
        const whole = request(running.url)
          .get(`/${route}`)
          .buffer(true)
          .parse((res, done) => {
            let text = "";
            res.on("data", (chunk: Buffer) => {
              text += chunk.toString();
            });
            res.on("end", () => done(null, text));
          })
          .then((res) => res);
        await eventually(async () => (await count()) === 1);
        expect((await request(running.url).get(`/${route}`)).status).toBe(503);
        open();
        expect(String((await whole).body)).toMatch(/first[\s\S]*second/);
        await eventually(async () => (await count()) === 0);

        // The client leaves while the stream waits on its next chunk: the callback is told, and the
        // permit stays with it until it settles (issue #27, defect 3).
        const late = gate();
        const departures: unknown[] = [];
        const again = await listen(createAdaptorServer({ fetch: build(store, late.opened, departures).fetch }) as Server);
        const cut = httpRequest(`${again.url}/${route}`);
        cut.on("error", () => {});
        cut.end();
        await eventually(async () => (await count()) === 1);
        cut.destroy();
        await eventually(() => departures.length === 1);
        expect(departures[0]).toBeInstanceOf(ClientAbortedError);
        expect(await count()).toBe(1);
        late.open();
        await eventually(async () => (await count()) === 0);
        await again.close();
      } finally {
        await running.close();
      }
    },
  );
});
