import { request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { RequestLease } from "../../integrations/http/types.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";

/**
 * What the handlers of every framework share with the test: gates the test
 * opens, the abort reasons handlers saw, and the store (to steal a lease).
 */
export class Control {
  readonly gates = new Map<string, () => void>();
  readonly waiting = new Map<string, Promise<void>>();
  readonly reasons = new Map<string, unknown>();
  readonly entered: string[] = [];
  /** Every `onLeaseLost` call of the routes that record them, in order. */
  readonly lostHook: { id: string; error: unknown }[] = [];

  /** `store` is what the app uses; `raw` (default: the same) is where a steal goes, unseen by a spy. */
  constructor(
    readonly store: Store,
    readonly raw: Store = store,
  ) {}

  /** A handler waits here until the test calls open(id). */
  hold(id: string): Promise<void> {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    this.gates.set(id, open);
    this.waiting.set(id, opened);
    this.entered.push(id);
    return opened;
  }

  open(id: string): void {
    this.gates.get(id)?.();
  }

  openAll(): void {
    for (const open of this.gates.values()) open();
  }

  /** An `onLeaseLost` hook that records its calls. */
  leaseLost(id: string, error: unknown): void {
    this.lostHook.push({ id, error });
  }

  /** Records why a handler's signal aborted. */
  watch(id: string, lease: RequestLease | undefined): void {
    lease?.signal.addEventListener("abort", () => this.reasons.set(id, lease.signal.reason), { once: true });
  }

  /** Removes a semaphore lease behind its holder's back (an operator, an eviction). */
  async steal(lease: RequestLease): Promise<void> {
    await this.raw.semaphore.release({ storeKey: storeKey("semaphore", "semaphore", lease.key), token: lease.token });
  }
}

/** Every framework builds the same routes (see suite.ts) over one store. */
export interface Harness {
  name: string;
  start(store: Store, control: Control): Promise<RunningApp>;
}

export interface RunningApp {
  url: string;
  /** Open client connections, as the server counts them. */
  connections(): Promise<number>;
  close(): Promise<void>;
}

export function connectionsOf(server: Server): () => Promise<number> {
  return () =>
    new Promise((resolve, reject) => server.getConnections((error, count) => (error ? reject(error) : resolve(count))));
}

export function listen(server: Server): Promise<RunningApp> {
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        connections: connectionsOf(server),
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

export const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** False when the connection was cut before the response's last byte. */
  complete: boolean;
}

/** A GET over its own connection, read to its end or to the cut; `leave()` disconnects the client. */
export function getOnce(url: string) {
  let leave = () => {};
  const answer = new Promise<Answer>((resolve) => {
    const req = httpRequest(url, { headers: { connection: "close" } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("close", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, complete: res.complete }));
    });
    req.on("error", () => resolve({ status: 0, headers: {}, body: "", complete: false }));
    leave = () => req.destroy();
    req.end();
  });
  return { answer, leave: () => leave() };
}
