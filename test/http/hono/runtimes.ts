import { request as httpRequest, type Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import type { Hono } from "hono";
import { listen } from "../harness.js";

/**
 * One request to a Hono app, as a client sees it: its status, its body chunk by chunk, and a way
 * to leave (close the connection, or cancel the body and abort the request off Node).
 */
export interface HonoCall {
  /** The status, once the response's head arrived. */
  readonly status: Promise<number>;
  /** The body read so far. */
  text(): string;
  /** Resolves with the whole body once it ended (rejects if it was cut). */
  readonly done: Promise<string>;
  /** The client goes away: the connection closes (Node), or the body is cancelled and the request aborted (fetch). */
  leave(): void;
}

/** A Hono app served one way: over HTTP by `@hono/node-server`, or called through `app.fetch` (fetch runtimes). */
export interface HonoRuntime {
  name: "node-server" | "app.fetch";
  start(app: Hono): Promise<{ call(path: string, headers?: Record<string, string>): HonoCall; close(): Promise<void> }>;
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  // Read by the test only when it cares; a rejection nobody awaits is not an error here.
  promise.catch(() => {});
  return { promise, resolve, reject };
}

const nodeServer: HonoRuntime = {
  name: "node-server",
  async start(app) {
    const running = await listen(createAdaptorServer({ fetch: app.fetch }) as Server);
    return {
      call(path, headers = {}) {
        const status = deferred<number>();
        const done = deferred<string>();
        let body = "";
        const req = httpRequest(`${running.url}${path}`, { headers });
        req.on("response", (res) => {
          status.resolve(res.statusCode ?? 0);
          res.setEncoding("utf8");
          res.on("data", (chunk: string) => {
            body += chunk;
          });
          res.on("end", () => done.resolve(body));
          res.on("aborted", () => done.reject(new Error("cut")));
          res.on("error", (error) => done.reject(error));
        });
        req.on("error", (error) => {
          status.reject(error);
          done.reject(error);
        });
        req.end();
        return { status: status.promise, text: () => body, done: done.promise, leave: () => req.destroy() };
      },
      close: () => running.close(),
    };
  },
};

const appFetch: HonoRuntime = {
  name: "app.fetch",
  async start(app) {
    return {
      call(path, headers = {}) {
        const status = deferred<number>();
        const done = deferred<string>();
        const client = new AbortController();
        let body = "";
        let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
        void (async () => {
          try {
            const res = await app.request(path, { headers, signal: client.signal });
            status.resolve(res.status);
            if (res.body === null) return done.resolve("");
            reader = res.body.getReader();
            const decoder = new TextDecoder();
            for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
              body += decoder.decode(chunk.value, { stream: true });
            }
            done.resolve(body);
          } catch (error) {
            status.reject(error);
            done.reject(error);
          }
        })();
        return {
          status: status.promise,
          text: () => body,
          done: done.promise,
          leave: () => {
            reader?.cancel().catch(() => {});
            client.abort();
          },
        };
      },
      close: async () => {},
    };
  },
};

/** Both ways a Hono app runs in the tests: Node's `http` through `@hono/node-server`, and `app.fetch`. */
export const honoRuntimes: HonoRuntime[] = [nodeServer, appFetch];
