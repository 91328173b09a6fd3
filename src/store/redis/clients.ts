import type { RedisClient } from "./types.js";
// Every difference between the Redis client libraries leasehold accepts lives
// here: the store (store.ts) talks to a ScriptClient only. No client package
// is imported: clients are recognised by their shape, so a user of one library
// never installs another.

/** Which library, and whether a single connection or a cluster. iovalkey counts as ioredis. */
export type ClientKind = "ioredis" | "ioredis-cluster" | "node-redis" | "node-redis-cluster";

/** A pub/sub connection the store subscribes channels on; `close()` ends it, resolving once it has ended. */
export interface Subscriber {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  close(): Promise<void>;
}

type Arg = string | number;

/** What the store needs of any client: scripts by SHA or by source, and a subscriber. */
export interface ScriptClient {
  readonly kind: ClientKind;
  evalsha(sha: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown>;
  eval(source: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown>;
  /**
   * A connection that delivers the messages of the channels it subscribes to
   * `onMessage`, or `undefined` when this client cannot make one (waiting then
   * runs on its timers alone).
   */
  subscriber(onMessage: (channel: string, message: string) => void): Subscriber | undefined;
}

type Loose = Record<string, unknown> & { [method: string]: unknown };

const fn = (value: unknown, name: string): boolean => typeof (value as Loose)[name] === "function";

/**
 * Recognises a client by its shape: node-redis has `evalSha` (camel case),
 * `connect` and `isOpen`, and a cluster also `nodeClient`; ioredis and iovalkey
 * have `evalsha` and `eval`, and a cluster says `isCluster`.
 */
export function clientKind(value: unknown): ClientKind | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  if (fn(value, "evalSha") && fn(value, "connect") && "isOpen" in value) {
    return fn(value, "nodeClient") ? "node-redis-cluster" : "node-redis";
  }
  if (fn(value, "evalsha") && fn(value, "eval")) {
    return (value as Loose).isCluster === true ? "ioredis-cluster" : "ioredis";
  }
  return undefined;
}

/** A client leasehold can use (see {@link clientKind}). */
export function isRedisClient(value: unknown): value is RedisClient {
  return clientKind(value) !== undefined;
}

/** What `client` may be, for error messages. */
export const ACCEPTED_CLIENTS =
  "an ioredis or iovalkey Redis or Cluster, or a node-redis client (createClient()) or cluster (createCluster())";

const ignore = (): void => {};

interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
  off?(event: string, listener: (...args: never[]) => void): unknown;
  listenerCount?(event: string): number;
}

class IoredisClient implements ScriptClient {
  constructor(
    private readonly raw: Loose,
    readonly kind: ClientKind,
  ) {}

  evalsha(sha: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    return (this.raw.evalsha as (...a: Arg[]) => Promise<unknown>)(sha, keys.length, ...keys, ...args);
  }

  eval(source: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    return (this.raw.eval as (...a: Arg[]) => Promise<unknown>)(source, keys.length, ...keys, ...args);
  }

  /** A duplicate of the client (a Cluster duplicates into a Cluster), subscribed in classic pub/sub. */
  subscriber(onMessage: (channel: string, message: string) => void): Subscriber | undefined {
    if (!fn(this.raw, "duplicate")) return undefined;
    const connection = (this.raw.duplicate as () => Emitter & Loose)();
    // Connection trouble shows up as failed calls on the main client; timers back waiting up.
    connection.on("error", ignore);
    connection.on("message", onMessage);
    return {
      subscribe: (channel) => (connection.subscribe as (c: string) => Promise<unknown>)(channel),
      unsubscribe: (channel) => (connection.unsubscribe as (c: string) => Promise<unknown>)(channel),
      close: () =>
        new Promise<void>((resolve) => {
          if (connection.status === "end") return resolve();
          connection.on("end", () => resolve());
          (connection.disconnect as () => void)();
        }),
    };
  }
}

/** How long after leasehold's own `connect()` of a client failed it tries again, at the earliest. */
const RECONNECT_AFTER_MS = 1000;

/**
 * node-redis wants strings, an options object for scripts, a `connect()`
 * before the first command, and a connection of its own for subscriptions.
 */
class NodeRedisClient implements ScriptClient {
  /** leasehold's own `connect()` of the client, while it is pending. */
  #connecting: Promise<void> | undefined;
  /** Once the client has been open, leasehold never opens it again: a client its owner closed stays closed. */
  #wasOpen = false;
  #retryAt = 0;
  #failure: unknown;
  /** A cluster its owner is connecting: commands wait for its slots. */
  #discovering: Promise<void> | undefined;

  constructor(
    private readonly raw: Loose & Emitter,
    readonly kind: ClientKind,
  ) {}

  evalsha(sha: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    return this.#send("evalSha", sha, keys, args);
  }

  eval(source: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    return this.#send("eval", source, keys, args);
  }

  #send(command: "evalSha" | "eval", script: string, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    const call = () =>
      (this.raw[command] as (s: string, o: object) => Promise<unknown>)(script, {
        keys,
        arguments: args.map(String),
      });
    const opening = this.#open();
    return opening === undefined ? call() : opening.then(call);
  }

  /**
   * A client that has never been open is connected here, on first use, once
   * (again only if that connect failed, at most once a second): commands wait
   * for it. A client that is open, or that was and has been closed, is left
   * as it is; a cluster still finding its slots is waited for.
   */
  #open(): Promise<void> | undefined {
    if (this.#wasOpen) return undefined;
    if (this.#connecting !== undefined) return this.#connecting;
    if (this.raw.isOpen === true) {
      if (!this.#discovered()) return this.#discovery();
      this.#wasOpen = true;
      return undefined;
    }
    // Too soon after leasehold's own connect failed: fail the same way, at once.
    if (performance.now() < this.#retryAt) return Promise.reject(this.#failure);
    // node-redis throws an 'error' event nobody listens to, which would end the process:
    // failures reach leasehold's callers as StoreUnavailableError instead.
    if (this.raw.listenerCount?.("error") === 0) this.raw.on("error", ignore);
    const connecting = (this.raw.connect as () => Promise<unknown>)().then(
      () => {
        this.#wasOpen = true;
        this.#connecting = undefined;
      },
      (error: unknown) => {
        this.#retryAt = performance.now() + RECONNECT_AFTER_MS;
        this.#failure = error;
        this.#connecting = undefined;
        throw error;
      },
    );
    connecting.catch(ignore); // each waiting command sees the failure; this branch only keeps it handled
    this.#connecting = connecting;
    return connecting;
  }

  /**
   * A cluster connecting (its owner called `connect()` and did not wait) knows
   * no slots yet, and fails every command: wait for it. v6 says so with
   * `isReady`; v5 has no masters yet.
   */
  #discovered(): boolean {
    if (this.kind !== "node-redis-cluster") return true;
    const { isReady, masters } = this.raw;
    return isReady === true || (isReady === undefined && Array.isArray(masters) && masters.length > 0);
  }

  /** Until the cluster's 'connect' event, and at most a second: then commands go, and fail as node-redis decides. */
  #discovery(): Promise<void> {
    this.#discovering ??= new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.raw.off?.("connect", done);
        this.#discovering = undefined;
        resolve();
      };
      const timer = setTimeout(done, RECONNECT_AFTER_MS);
      timer.unref();
      this.raw.on("connect", done);
    });
    return this.#discovering;
  }

  /**
   * A single client: a duplicate (same options) that leasehold connects, and
   * closes when the store stops listening. A cluster: the cluster's own
   * pub/sub connection, which node-redis opens on the first subscription and
   * closes after the last, so there is nothing of leasehold's to close. Classic
   * pub/sub either way: the scripts PUBLISH, which a cluster sends to every node.
   */
  subscriber(onMessage: (channel: string, message: string) => void): Subscriber | undefined {
    const listener = (message: string, channel: string) => onMessage(channel, message);
    if (this.kind === "node-redis-cluster") {
      const cluster = this.raw;
      const subscribe = (channel: string) => (cluster.subscribe as Subscribe)(channel, listener);
      return {
        subscribe: (channel) => {
          const opening = this.#open();
          return opening === undefined ? subscribe(channel) : opening.then(() => subscribe(channel));
        },
        unsubscribe: (channel) => (cluster.unsubscribe as Subscribe)(channel, listener),
        close: () => Promise.resolve(),
      };
    }
    if (!fn(this.raw, "duplicate")) return undefined;
    const connection = (this.raw.duplicate as () => Loose & Emitter)();
    connection.on("error", ignore);
    (connection.connect as () => Promise<unknown>)().catch(ignore);
    return {
      subscribe: (channel) => (connection.subscribe as Subscribe)(channel, listener),
      unsubscribe: (channel) => (connection.unsubscribe as Subscribe)(channel, listener),
      close: async () => {
        const end = fn(connection, "destroy") ? connection.destroy : connection.disconnect;
        await Promise.resolve((end as () => unknown).call(connection)).catch(ignore);
      },
    };
  }
}

type Subscribe = (channel: string, listener: (message: string, channel: string) => void) => Promise<unknown>;

const adapted = new WeakMap<object, ScriptClient>();

/**
 * The uniform face of a client, one per client object, so every store over
 * one client shares its connection state. Throws when `client` is not one
 * (callers validate first).
 */
export function scriptClient(client: RedisClient): ScriptClient {
  let adapter = adapted.get(client);
  if (adapter !== undefined) return adapter;
  const kind = clientKind(client);
  if (kind === undefined) throw new TypeError(`leasehold: not a Redis client: expected ${ACCEPTED_CLIENTS}.`);
  const raw = client as unknown as Loose & Emitter;
  adapter =
    kind === "node-redis" || kind === "node-redis-cluster" ? new NodeRedisClient(raw, kind) : new IoredisClient(raw, kind);
  adapted.set(client, adapter);
  return adapter;
}
