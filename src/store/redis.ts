import { StoreUnavailableError, ValidationError } from "../errors.js";
import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import { Coalescer } from "./coalesce.js";
import { scripts } from "./lua.generated.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  Store,
  WaiterRefresh,
  WaiterStatus,
} from "./types.js";

/**
 * The part of a Redis client leasehold uses, typed structurally so that an
 * ioredis `Redis` or `Cluster` (or any compatible client) fits. `duplicate`
 * gives the subscriber connection that wakes waiters; without it, waiting
 * still works, woken by timers only.
 */
export interface RedisClient {
  evalsha(...args: never[]): Promise<unknown>;
  eval(...args: never[]): Promise<unknown>;
  duplicate?(...args: never[]): unknown;
}

/** The part of a subscriber connection leasehold uses. */
interface Subscriber {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  disconnect(): void;
}

type ScriptCall = (script: string, keyCount: number, ...args: (string | number)[]) => Promise<unknown>;
/** The embedded scripts, by name; the model-based suite swaps in a build whose clock it sets. */
export type Scripts = { readonly [Name in keyof typeof scripts]: Script };
type Script = { readonly name: string; readonly sha: string; readonly source: string };

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * The longest one round trip may take before the call fails with
   * `StoreUnavailableError`. Bounds what ioredis would otherwise spend in its
   * offline queue (a minute or more) while Redis is down.
   * @default 2000
   */
  timeoutMs?: number;
  /**
   * A waiter's own lease: each process refreshes its waiters' leases (one
   * call per id per third of this), so a waiter whose process dies stops
   * blocking the queue after at most this long.
   * @default 5000
   */
  waiterLeaseMs?: number;
}

/** A Store that also says how long its round trips may take. */
export interface RedisStore extends Store {
  readonly kind: "redis";
  readonly timeoutMs: number;
  readonly waiterLeaseMs: number;
  readonly client: RedisClient;
}

/**
 * Runs a script by SHA, sending the source only when the server answers
 * NOSCRIPT (after a restart, a failover or SCRIPT FLUSH); EVAL caches it
 * again for the next call.
 */
async function runScript(client: RedisClient, script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await (client.evalsha as unknown as ScriptCall)(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
    return (client.eval as unknown as ScriptCall)(script.source, keys.length, ...keys, ...args);
  }
}

const STATUS_REPLIES = [0, 1, 2, 3];

/** `{status, ms}`, and for a semaphore a third item: whether the id keeps waiters or heavier holders. */
function acquireReply(reply: unknown, script: Script): AcquireReply {
  if (
    Array.isArray(reply) &&
    (reply.length === 2 || reply.length === 3) &&
    STATUS_REPLIES.includes(reply[0]) &&
    typeof reply[1] === "number"
  ) {
    const [status, retryAfterMs] = reply as [number, number];
    if (status === 1) return { acquired: true, retryAfterMs: 0 };
    return {
      acquired: false,
      retryAfterMs,
      ...(status === 2 ? { queued: true } : {}),
      ...(status === 3 ? { queueFull: true } : {}),
    };
  }
  throw unexpected(reply, script);
}

function flag(reply: unknown, script: Script): boolean {
  if (reply === 0 || reply === 1) return reply === 1;
  throw unexpected(reply, script);
}

/**
 * A fast path's reply for `count` items: `{-1}` (the id has waiters or heavier
 * holders: take the full path) becomes `undefined` for each; otherwise one 0/1
 * per item, then `tail` numbers.
 */
function perItem(
  reply: unknown,
  count: number,
  tail: number,
  script: Script,
): { flags: (boolean | undefined)[]; tail: number[] } {
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === -1) return { flags: new Array(count).fill(undefined), tail: [] };
    if (reply.length === count + tail && reply.every((n) => typeof n === "number")) {
      const flags = reply.slice(0, count);
      if (flags.every((n) => n === 0 || n === 1)) return { flags: flags.map((n) => n === 1), tail: reply.slice(count) };
    }
  }
  throw unexpected(reply, script);
}

const WAITER_STATUS: Record<number, WaiterStatus> = { 0: "gone", 1: "held", 2: "waiting" };

/** Statuses, one per token, then the ms until the nearest lease ends. */
function refreshed(reply: unknown, count: number, script: Script): WaiterRefresh {
  if (Array.isArray(reply) && reply.length === count + 1) {
    const retryAfterMs = reply[count];
    const statuses = reply.slice(0, count);
    if (typeof retryAfterMs === "number" && statuses.every((status) => WAITER_STATUS[status] !== undefined)) {
      return { statuses: statuses.map((status: number) => WAITER_STATUS[status] as WaiterStatus), retryAfterMs };
    }
  }
  throw unexpected(reply, script);
}

/** Two flat lists of (token, weight, ms left): holders, then waiters in queue order. */
function inspection(reply: unknown, script: Script): Inspection {
  const entries = (list: unknown): Inspection["holders"] | undefined => {
    if (!Array.isArray(list) || list.length % 3 !== 0) return undefined;
    const out: Inspection["holders"] = [];
    for (let i = 0; i < list.length; i += 3) {
      const [token, weight, expiresInMs] = [list[i], list[i + 1], list[i + 2]];
      if (typeof token !== "string" || typeof weight !== "number" || typeof expiresInMs !== "number") return undefined;
      out.push({ token, weight, expiresInMs });
    }
    return out;
  };
  if (Array.isArray(reply) && reply.length === 2) {
    const holders = entries(reply[0]);
    const waiters = entries(reply[1]);
    if (holders !== undefined && waiters !== undefined) return { holders, waiters };
  }
  throw unexpected(reply, script);
}

function unexpected(reply: unknown, script: Script): Error {
  return new Error(`unexpected reply ${JSON.stringify(reply)} from ${script.name}`);
}

/**
 * The keys of a semaphore (see lua/lib/holders.lua and queue.lua), all in its hash slot: the
 * holders set, the meta hash (weights, waiters' weights and limits, the id's limit), the queue
 * and the waiter lease ends. The fast paths declare the first only.
 */
const semaphoreKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`];
const lockKeys = (key: string): string[] => [key, `${key}:q`, `${key}:qe`];
/** Where grants on a key are announced (the scripts derive the same name). */
const channelOf = (key: string): string => `${key}:ch`;

/** A coalescing group's name: two numbers, then the key (which may hold spaces). */
function fields(group: string): [string, string, string] {
  const first = group.indexOf(" ");
  const second = group.indexOf(" ", first + 1);
  return [group.slice(0, first), group.slice(first + 1, second), group.slice(second + 1)];
}

/** In-flight calls of one kind on one id from which further calls are gathered into one. */
const COALESCE_FROM = 2;
/** Ids remembered as having waiters or heavier holders; past this, forgetting costs one round trip. */
const CONTENDED_IDS = 10_000;

class RedisLeaseStore implements RedisStore {
  readonly kind = "redis";
  #subscriber: Subscriber | undefined;
  readonly #channels = new Map<string, { listeners: Set<(grant: Grant) => void>; ready: Promise<unknown> }>();
  #idle: NodeJS.Timeout | undefined;
  // A plain field, not #private: wrappers made with Object.create(store) must keep working.
  private readonly scripts: Scripts;
  /**
   * Ids whose fast path last answered "waiters or heavier holders here": their weight-1
   * releases go straight to the full script rather than trying the fast one first.
   */
  private readonly contended = new Set<string>();
  private readonly takes: Coalescer<string, boolean | number | undefined>;
  private readonly returns: Coalescer<string, boolean | undefined>;
  private readonly extends: Coalescer<string, boolean>;

  constructor(
    readonly client: RedisClient,
    readonly timeoutMs: number,
    readonly waiterLeaseMs: number,
    table: Scripts,
  ) {
    this.scripts = table;
    // Groups are "<limit> <lease> <key>": one batch shares the limit and lease of its calls.
    this.takes = new Coalescer(COALESCE_FROM, async (group, tokens) => {
      const [limit, lease, key] = fields(group);
      const script = this.scripts.semaphoreTake;
      const { flags, tail } = perItem(
        await runScript(this.client, script, [key], [limit, lease, ...tokens]),
        tokens.length,
        1,
        script,
      );
      this.#contention(key, flags[0] === undefined);
      // A refusal answers with the ms until the nearest lease ends.
      return flags.map((held) => (held === false ? (tail[0] as number) : held));
    });
    this.returns = new Coalescer(COALESCE_FROM, async (key, tokens) => {
      const script = this.scripts.semaphoreReturn;
      const { flags } = perItem(await runScript(this.client, script, [key], tokens), tokens.length, 0, script);
      this.#contention(key, flags[0] === undefined);
      return flags;
    });
    // Groups are "<lease> <heavy> <key>": a heavier lease keeps the meta hash alive too.
    this.extends = new Coalescer(COALESCE_FROM, async (group, tokens) => {
      const [lease, heavy, key] = fields(group);
      const script = this.scripts.semaphoreExtend;
      const keys = heavy === "1" ? [key, `${key}:m`] : [key];
      const { flags } = perItem(await runScript(this.client, script, keys, [lease, ...tokens]), tokens.length, 0, script);
      return flags as boolean[];
    });
  }

  #contention(key: string, contended: boolean): void {
    if (!contended) {
      this.contended.delete(key);
      return;
    }
    if (this.contended.size >= CONTENDED_IDS) this.contended.clear();
    this.contended.add(key);
  }

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
  ): Promise<AcquireReply> {
    if (weight === 1 && queue === undefined && !this.contended.has(key)) {
      // Almost every request: one declared key, gathered with others of the same turn.
      const taken = await this.takes.call(`${limit} ${leaseMs} ${key}`, token);
      if (taken === true) return { acquired: true, retryAfterMs: 0 };
      if (typeof taken === "number") return { acquired: false, retryAfterMs: taken };
    }
    const script = this.scripts.semaphoreAcquire;
    const args = [token, limit, weight, leaseMs, queue?.claimMs ?? 0, queue?.maxQueue ?? 0];
    const raw = await runScript(this.client, script, semaphoreKeys(key), args);
    const reply = acquireReply(raw, script);
    this.#contention(key, (raw as unknown[])[2] === 1);
    return reply;
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number, weight?: number): Promise<boolean> {
    return this.extends.call(`${leaseMs} ${weight !== undefined && weight > 1 ? 1 : 0} ${key}`, token);
  }

  async semaphoreRelease(key: string, token: string, weight?: number): Promise<boolean> {
    if (weight === 1 && !this.contended.has(key)) {
      const returned = await this.returns.call(key, token);
      if (returned !== undefined) return returned;
    }
    const script = this.scripts.semaphoreRelease;
    const reply = await runScript(this.client, script, semaphoreKeys(key), [token]);
    if (Array.isArray(reply) && (reply.length === 2 || reply.length === 3) && (reply[1] === 0 || reply[1] === 1)) {
      this.#contention(key, reply[1] === 1);
      if (typeof reply[2] === "string") this.#announced(key, reply[2]);
      return flag(reply[0], script);
    }
    throw unexpected(reply, script);
  }

  async semaphoreCount(key: string): Promise<number> {
    const reply = await runScript(this.client, this.scripts.semaphoreCount, [key], []);
    if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0) return reply;
    throw unexpected(reply, this.scripts.semaphoreCount);
  }

  async semaphoreStats(key: string): Promise<SemaphoreFigures> {
    const script = this.scripts.semaphoreStats;
    const reply = await runScript(this.client, script, semaphoreKeys(key), []);
    if (Array.isArray(reply) && reply.length === 3 && reply.every((n) => Number.isInteger(n) && n >= 0)) {
      const [used, holders, waiting] = reply as [number, number, number];
      return { used, holders, waiting };
    }
    throw unexpected(reply, script);
  }

  async lockStats(key: string): Promise<LockStats> {
    const script = this.scripts.lockStats;
    const reply = await runScript(this.client, script, [key], []);
    if (Array.isArray(reply) && reply.length === 2 && (reply[0] === 0 || reply[0] === 1) && Number.isInteger(reply[1])) {
      return { held: reply[0] === 1, expiresInMs: reply[1] as number };
    }
    throw unexpected(reply, script);
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    const script = this.scripts.semaphoreInspect;
    return inspection(await runScript(this.client, script, semaphoreKeys(key), []), script);
  }

  async lockInspect(key: string): Promise<Inspection> {
    const script = this.scripts.lockInspect;
    return inspection(await runScript(this.client, script, lockKeys(key), []), script);
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    await runScript(this.client, this.scripts.semaphoreLeave, semaphoreKeys(key), [token]);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.semaphoreRefreshWaiters;
    return refreshed(await runScript(this.client, script, semaphoreKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    const script = this.scripts.lockAcquire;
    const args = [token, ttlMs, queue?.claimMs ?? 0, queue?.maxQueue ?? 0];
    return acquireReply(await runScript(this.client, script, lockKeys(key), args), script);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const script = this.scripts.lockExtend;
    return flag(await runScript(this.client, script, [key], [token, ttlMs]), script);
  }

  async lockRelease(key: string, token: string): Promise<boolean> {
    const script = this.scripts.lockRelease;
    return this.#released(await runScript(this.client, script, lockKeys(key), [token]), key, script);
  }

  async lockLeave(key: string, token: string): Promise<void> {
    await runScript(this.client, this.scripts.lockLeave, lockKeys(key), [token]);
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.lockRefreshWaiters;
    return refreshed(await runScript(this.client, script, lockKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  /**
   * One subscriber connection per client, shared by every waiter of this
   * process; a channel is subscribed while a local waiter needs it, and the
   * connection is closed a second after the last one leaves.
   */
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
      throw error;
    }
    return stop;
  }

  #connect(): Subscriber | undefined {
    clearTimeout(this.#idle);
    if (this.#subscriber !== undefined) return this.#subscriber;
    if (typeof this.client.duplicate !== "function") return undefined;
    const subscriber = (this.client.duplicate as () => Subscriber)();
    subscriber.on("error", () => {
      // Connection trouble shows up as failed calls on the main client; timers back waiting up.
    });
    subscriber.on("message", (channel, message) => this.#deliver(channel, message));
    this.#subscriber = subscriber;
    return subscriber;
  }

  /** Hands a grant announcement ("<reserved ms> <token>...") to this process's waiters on its channel. */
  #deliver(channel: string, message: string): void {
    const entry = this.#channels.get(channel);
    if (entry === undefined) return;
    const [reserved, ...tokens] = message.split(" ");
    const grant = { tokens, reservedMs: Number(reserved) || this.waiterLeaseMs };
    for (const listener of entry.listeners) listener(grant);
  }

  /**
   * A lock release's reply: its flag, and the announcement of the waiter it
   * granted, if any.
   */
  #released(reply: unknown, key: string, script: Script): boolean {
    if (Array.isArray(reply) && reply.length === 2 && typeof reply[1] === "string") {
      this.#announced(key, reply[1]);
      return flag(reply[0], script);
    }
    return flag(reply, script);
  }

  /**
   * A release that granted waiters answers with the announcement too: this
   * process's own waiters hear it now rather than after the pub/sub round (a
   * duplicate from pub/sub is harmless: waking is idempotent).
   */
  #announced(key: string, announcement: string): void {
    // Never call back into the engine from inside a store call.
    queueMicrotask(() => this.#deliver(channelOf(key), announcement));
  }

  #closeWhenIdle(): void {
    if (this.#channels.size > 0) return;
    clearTimeout(this.#idle);
    this.#idle = setTimeout(() => {
      if (this.#channels.size > 0 || this.#subscriber === undefined) return;
      this.#subscriber.disconnect();
      this.#subscriber = undefined;
    }, 1000);
    this.#idle.unref();
  }
}

async function withTimeout<T>(pending: Promise<T>, ms: number): Promise<T> {
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
 * A store over a Redis server (or Valkey, or a Redis Cluster): the limit
 * holds across every process that points at the same server. Passing an
 * ioredis client as `client` wraps it in one of these with the defaults;
 * call it yourself to change them.
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { redisStore, semaphore } from "leasehold";
 * const store = redisStore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { timeoutMs: 500 });
 * const slots = semaphore({ client: store, limit: 20 });
 * ```
 */
export function redisStore(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  return createRedisStore(client, options, scripts);
}

/** {@link redisStore} over a given script table: the model-based suite passes one whose clock it sets. */
export function createRedisStore(client: RedisClient, options: RedisStoreOptions, table: Scripts): RedisStore {
  if (typeof client !== "object" || client === null || typeof client.evalsha !== "function") {
    throw new ValidationError("client", "redisStore(client) needs an ioredis Redis or Cluster (anything with evalsha and eval).");
  }
  const given = optionsObject(options, "redisStore");
  knownOptions(given, ["timeoutMs", "waiterLeaseMs"], "redisStore");
  const timeoutMs =
    given.timeoutMs === undefined
      ? 2000
      : positiveMs("timeoutMs", given.timeoutMs, "Pass the longest a Redis round trip may take before failing, e.g. 2000.");
  const waiterLeaseMs =
    given.waiterLeaseMs === undefined
      ? 5000
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without its process refreshing it, e.g. 5000.",
        );
  return new RedisLeaseStore(client, timeoutMs, waiterLeaseMs, table);
}
