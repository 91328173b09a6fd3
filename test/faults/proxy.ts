import { createServer, type Server, Socket } from "node:net";

/**
 * A TCP proxy between clients and Redis that can misbehave on command:
 * stall (hold every byte both ways), cut (reset every connection), or drop
 * the next reply from Redis and then cut that connection (the command ran,
 * its answer never arrives).
 */
export class FaultProxy {
  readonly #server: Server;
  readonly #pairs = new Set<{ client: Socket; upstream: Socket; held: (() => void)[] }>();
  #stalled = false;
  #dropNext = false;
  port = 0;

  constructor(private readonly targetPort: number) {
    this.#server = createServer((client) => this.#accept(client));
  }

  listen(): Promise<number> {
    return new Promise((resolve) => {
      this.#server.listen(0, "127.0.0.1", () => {
        const address = this.#server.address();
        this.port = typeof address === "object" && address !== null ? address.port : 0;
        resolve(this.port);
      });
    });
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Hold every byte in both directions until resume(). */
  stall(): void {
    this.#stalled = true;
  }

  resume(): void {
    this.#stalled = false;
    for (const pair of this.#pairs) for (const send of pair.held.splice(0)) send();
  }

  /** Reset every open connection. */
  cut(): void {
    for (const pair of this.#pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
  }

  /** The next reply from Redis is swallowed, and its connection reset right after. */
  dropNextReply(): void {
    this.#dropNext = true;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    const upstream = new Socket();
    const pair = { client, upstream, held: [] as (() => void)[] };
    this.#pairs.add(pair);
    const forward = (to: Socket, data: Buffer) => {
      const send = () => {
        if (!to.destroyed) to.write(data);
      };
      if (this.#stalled) pair.held.push(send);
      else send();
    };
    client.on("data", (data) => forward(upstream, data));
    upstream.on("data", (data) => {
      if (this.#dropNext) {
        this.#dropNext = false;
        setTimeout(() => {
          client.destroy();
          upstream.destroy();
        }, 20);
        return;
      }
      forward(client, data);
    });
    const close = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("close", close);
    upstream.on("close", close);
    client.on("error", close);
    upstream.on("error", close);
    upstream.connect(this.targetPort, "127.0.0.1");
  }
}
