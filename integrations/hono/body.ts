import { type Held, type HonoExchange, streamed } from "./request.js";

function ignore(): void {}

/**
 * A response body the permit waits for, read through this source.
 *
 * Off Node (Bun, Deno, Workers) there is no response object to watch: every body is held, and its
 * end completes the response. A body made from a stream (Hono's `stream()`, `streamText()`,
 * `streamSSE()`, `c.body(stream)`, a `new Response(readable)` the handler built: `work`, see
 * {@link streamedBody}) is also part of the handler's work, on Node too: its producer (the helper's
 * callback, or whatever feeds the stream) runs on after the handler returned, and its end is the stream's.
 *
 * When the client leaves, a plain body is cancelled. A streamed one is read on to its end instead,
 * and what is read is dropped: cancelling it would stop Hono's stream and hide its callback's end,
 * which the permit must wait for. The callback is told through `lease.signal` (the client left) and
 * stops; its stream closes, and the permit returns. One that ignores its signal keeps the permit
 * until `disconnectGraceMs`: then the lease is taken back and reported lost, and the stream is
 * cancelled (Hono's `onAbort` hears of it). A lost lease errors the body, so the client sees a cut
 * stream rather than a complete-looking one.
 */
export class HeldBody implements Held {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #exchange: HonoExchange;
  readonly #work: boolean;
  #controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Passed on to the client; read and dropped (the client left, or nobody reads it); or over. */
  #state: "passing" | "draining" | "over" = "passing";
  #ended = false;

  constructor(body: ReadableStream<Uint8Array>, exchange: HonoExchange, work: boolean) {
    this.#reader = body.getReader();
    this.#exchange = exchange;
    this.#work = work;
    exchange.held = this;
    if (work) exchange.partStarted();
  }

  get unread(): boolean {
    return this.#state === "passing";
  }

  start(controller: ReadableStreamDefaultController<Uint8Array>): void {
    this.#controller = controller;
  }

  async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    let chunk: Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>;
    try {
      chunk = await this.#reader.read();
    } catch (error) {
      if (this.#state === "passing") controller.error(error);
      this.#end();
      return;
    }
    // Draining since this read began: the drain reads on; stopped: nothing more to do.
    if (this.#state !== "passing") return;
    if (chunk.done) {
      controller.close();
      this.#end();
    } else controller.enqueue(chunk.value);
  }

  /** The client stopped reading: it left. */
  cancel(reason?: unknown): Promise<void> | undefined {
    if (this.#state !== "passing") return undefined;
    this.#exchange.clientGone();
    if (this.#work) {
      this.drain();
      return undefined;
    }
    this.#state = "over";
    // A plain body's source stops when cancelled: that is its end.
    return this.#reader.cancel(reason).finally(() => this.#end());
  }

  /** The client left before the body was made: it is never passed on, and ends as after a departure. */
  abandon(reason: Error): void {
    this.#controller?.error(reason);
    void this.cancel(reason);
  }

  /** Nobody will read the body (the client left, or Hono drops a HEAD response's body): read it to its end here. */
  drain(): void {
    if (this.#state !== "passing") return;
    this.#state = "draining";
    void this.#drain();
  }

  async #drain(): Promise<void> {
    try {
      while (!(await this.#reader.read()).done) {
        // Dropped: nobody reads it.
      }
    } catch {
      // The stream failed: its producer is over all the same.
    }
    this.#end();
  }

  /** The lease is gone (lost, or taken back at the grace): end the body and stop its producer. */
  stop(error: Error): void {
    if (this.#state === "passing") this.#controller?.error(error);
    this.#state = "over";
    this.#reader.cancel(error).catch(ignore);
    this.#end();
  }

  /** The body is over, once: off Node its end is the response's; a streamed body's is a part of the work. */
  #end(): void {
    this.#state = "over";
    if (this.#ended) return;
    this.#ended = true;
    if (this.#exchange.outgoing === undefined) this.#exchange.responded();
    if (this.#work) this.#exchange.partEnded();
  }
}

/** The symbol under which `@hono/node-server`'s own Response keeps what it was made from, once seen. */
let madeFrom: symbol | undefined;

/**
 * True when `res`'s body is a stream of the handler's (Hono's stream helpers, `c.body(stream)`, or a
 * `new Response(readable)` it built, as an SSE proxy does): its producer may run on after the handler
 * returned, and is part of the handler's work. `@hono/node-server`'s own Response says what it was
 * made from without making its body (a string, bytes, a Blob or nothing are plain, and keep its
 * fast path); any other response's body cannot be told from a stream, and is taken for one.
 */
export function streamedBody(res: Response): boolean {
  if (madeFrom === undefined) {
    for (const key of Object.getOwnPropertySymbols(res)) {
      if (key.description === "cache" && Array.isArray((res as unknown as Record<symbol, unknown>)[key])) madeFrom = key;
    }
  }
  const made = madeFrom === undefined ? undefined : (res as unknown as Record<symbol, unknown>)[madeFrom];
  if (!Array.isArray(made)) return true;
  const body: unknown = made[1];
  return !(body === null || typeof body === "string" || body instanceof Uint8Array || body instanceof Blob);
}

/** `res` with its body held (see {@link HeldBody}); a response without a body is complete at once. */
export function holdBody(res: Response, exchange: HonoExchange, work: boolean): Response {
  if (res.body === null) {
    if (exchange.outgoing === undefined) exchange.responded();
    return res;
  }
  const held = new HeldBody(res.body, exchange, work);
  const body = new ReadableStream(held);
  // Off Node, the client left before the body was made: nobody will read it. (On Node,
  // `@hono/node-server` cancels it when it finds the response closed.)
  if (exchange.gone && exchange.outgoing === undefined) held.abandon(exchange.clientGoneReason as Error);
  return new Response(body, res);
}

/**
 * A response whose body nobody reads: Hono answers HEAD with the GET handler's status and headers
 * and drops its body. A plain body is done with; a streamed one is read to its end here, as for a
 * client that left after the headers (its callback is told through its signal).
 */
export function dropBody(res: Response, exchange: HonoExchange, work: boolean): void {
  if (!work || res.body === null) {
    if (exchange.outgoing === undefined) exchange.responded();
    return;
  }
  exchange.clientGone();
  new HeldBody(res.body, exchange, true).drain();
}

/**
 * What the handler made is never sent (a middleware before the guard answered first, and Hono drops
 * the handler's response): a body made from a stream is read to its end here, so the permit waits
 * for its producer, at most `disconnectGraceMs` (then reported lost with `cause`); anything else is
 * done with.
 */
export function unsent(exchange: HonoExchange, cause: Error | undefined): void {
  const made = streamed(exchange.c);
  if (made === undefined || made.locked) {
    if (exchange.outgoing === undefined) exchange.responded();
    return;
  }
  new HeldBody(made, exchange, true).drain();
  exchange.workUnseen(cause);
}

/**
 * The handler's response is dropped: its lease was lost, and the loss answered (503) or the client
 * gone, before the handler returned it. A stream it made (`stream()`, `streamSSE()`, `c.body(stream)`)
 * is cancelled: nobody will read it, and its producer would otherwise wait on its first write
 * forever. Hono's stream helpers hear of it (`onAbort`), and their writes return at once.
 */
export function cancelDropped(exchange: HonoExchange): void {
  const made = streamed(exchange.c);
  if (made !== undefined) cancelLate(exchange, made);
  exchange.late = cancelLate;
}

function cancelLate(exchange: HonoExchange, made: ReadableStream<Uint8Array>): void {
  if (!made.locked) made.cancel(exchange.lost).catch(ignore);
}

/**
 * The guard cannot see the handler's end (a `timeout()` between them answered first): a stream the
 * handler makes from now on is never sent either. It is read to its end here, so its producer runs
 * to its end (told through `lease.signal` at the grace's end, when the permit is taken back).
 */
export function drainLate(exchange: HonoExchange): void {
  exchange.late = drainMade;
}

function drainMade(exchange: HonoExchange, made: ReadableStream<Uint8Array>): void {
  if (!made.locked) new HeldBody(made, exchange, true).drain();
}
