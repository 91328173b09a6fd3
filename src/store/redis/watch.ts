// Grant announcements (lua/lib/grant.lua): a waiter hears that it was granted over pub/sub, or in
// the reply of a release made by its own process.
import { StoreUnavailableError } from "../../errors/index.js";
import type { Grant } from "../contract/calls.js";
import type { ScriptClient, Subscriber } from "./clients.js";
import { permissionError } from "./permissions.js";

/** Where grants on a key are announced (the scripts derive the same name). */
const channelOf = (key: string): string => `${key}:ch`;

/**
 * A grant as the scripts announce it: "<shortest reservation ms>\n<token>\n<fence>..."
 * (lua/lib/grant.lua). Newlines, since a tenant, and so a token, may hold spaces.
 */
export function parseAnnouncement(message: string, waiterLeaseMs: number): Grant {
  const [reserved, ...pairs] = message.split("\n");
  const tokens: string[] = [];
  const fences: number[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) {
    tokens.push(pairs[i] as string);
    fences.push(Number(pairs[i + 1]));
  }
  return { tokens, fences, waiterLeaseMs: Number(reserved) || waiterLeaseMs };
}

export async function withTimeout<T>(pending: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      pending,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new StoreUnavailableError(`the redis subscriber did not answer within ${ms} ms.`, undefined, "redis")),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One subscriber connection per store, shared by every waiter of this
 * process; a channel is subscribed while a local waiter needs it, and the
 * connection is closed a second after the last one leaves.
 */
export class Announcements {
  #subscriber: Subscriber | undefined;
  readonly #channels = new Map<string, { listeners: Set<(grant: Grant) => void>; ready: Promise<unknown> }>();
  #idle: NodeJS.Timeout | undefined;

  constructor(
    private readonly calls: ScriptClient,
    private readonly timeoutMs: number,
    private readonly waiterLeaseMs: number,
  ) {}

  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    const subscriber = this.#connect();
    if (subscriber === undefined) return () => {};
    const channel = channelOf(key);
    let entry = this.#channels.get(channel);
    if (entry === undefined) {
      entry = { listeners: new Set(), ready: subscriber.subscribe(channel) };
      this.#channels.set(channel, entry);
    }
    entry.listeners.add(onGrant);
    const current = entry;
    const stop = () => {
      current.listeners.delete(onGrant);
      if (current.listeners.size > 0 || this.#channels.get(channel) !== current) return;
      this.#channels.delete(channel);
      subscriber.unsubscribe(channel).catch(() => {});
      this.#closeWhenIdle();
    };
    try {
      await withTimeout(current.ready, this.timeoutMs);
    } catch (error) {
      stop();
      throw permissionError(error, undefined, key) ?? error;
    }
    return stop;
  }

  /**
   * A release that granted waiters answers with the announcement too: this
   * process's own waiters hear it now rather than after the pub/sub round (a
   * duplicate from pub/sub is harmless: waking is idempotent).
   */
  announced(key: string, announcement: string): void {
    // Never call back into the engine from inside a store call.
    queueMicrotask(() => this.#deliver(channelOf(key), announcement));
  }

  /** Leaves every channel and ends the connection (at most a timeout later: it is ended either way). */
  async close(): Promise<void> {
    clearTimeout(this.#idle);
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    const channels = [...this.#channels.keys()];
    this.#channels.clear();
    if (subscriber === undefined) return;
    // A cluster's subscriptions live on your client (node-redis): leave them before letting go.
    const leaving = Promise.all(channels.map((channel) => subscriber.unsubscribe(channel).catch(() => {})));
    await withTimeout(leaving, this.timeoutMs).catch(() => {});
    await withTimeout(subscriber.close(), this.timeoutMs).catch(() => {});
  }

  #connect(): Subscriber | undefined {
    clearTimeout(this.#idle);
    if (this.#subscriber !== undefined) return this.#subscriber;
    const subscriber = this.calls.subscriber((channel, message) => this.#deliver(channel, message));
    this.#subscriber = subscriber;
    return subscriber;
  }

  /** Hands a grant announcement to this process's waiters on its channel. */
  #deliver(channel: string, message: string): void {
    const entry = this.#channels.get(channel);
    if (entry === undefined) return;
    const grant = parseAnnouncement(message, this.waiterLeaseMs);
    for (const listener of entry.listeners) listener(grant);
  }

  #closeWhenIdle(): void {
    if (this.#channels.size > 0) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => {
      if (this.#channels.size > 0 || this.#subscriber === undefined) return;
      this.#subscriber.close().catch(() => {});
      this.#subscriber = undefined;
    }, 1000);
    this.#idle.unref();
  }
}
