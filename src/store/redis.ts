import { STORE_TIMEOUT_MS, WAITER_LEASE_MS } from "../defaults.js";
import { ShutdownError, StoreUnavailableError, ValidationError } from "../errors.js";
import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import { ACCEPTED_CLIENTS, isRedisClient, type RedisClient, type Subscriber, scriptClient } from "./clients.js";
import { Coalescer } from "./coalesce.js";
import { scripts } from "./lua.generated.js";
import { permissionError } from "./permissions.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  Store,
  TenantOptions,
  WaiterRefresh,
  WaiterStatus,
} from "./types.js";

export type { IoredisLikeClient, NodeRedisLikeClient, RedisClient } from "./clients.js";

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
  /**
   * Closes the connection the store opened for itself (the subscriber that
   * waiting uses, a duplicate of your client) and its timers; every later
   * call is refused with `ShutdownError`. Your client is left open: quit it
   * yourself. Close the semaphores and locks made on the store first: their
   * leases are released through it. A second call returns the same promise.
   *
   * @example
   * ```ts
   * await slots.close();
   * await store.close();
   * await redis.quit();
   * ```
   */
  close(): Promise<void>;
}

/**
 * Runs a script by SHA, sending the source only when the server answers
 * NOSCRIPT (after a restart, a failover or SCRIPT FLUSH); EVAL caches it
 * again for the next call.
 */
async function runScript(client: RedisClient, script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
  const calls = scriptClient(client);
  try {
    try {
      return await calls.evalsha(script.sha, keys, args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error;
      return await calls.eval(script.source, keys, args);
    }
  } catch (error) {
    // An ACL that lacks a permission: say which, and how to grant it, rather than "failed".
    throw permissionError(error, script, keys[0]) ?? error;
  }
}

const STATUS_REPLIES = [0, 1, 2, 3, 4];

/** A fence as the scripts send it: a positive safe integer. */
const isFence = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n > 0;

/** The id's typical hold as the scripts send it (lua/lib/hold-read.lua): whole ms, 0 for none. */
const isHold = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;

/**
 * `{status, ms, fence}` from a lock; `{status, ms, marked, fence}` from a
 * semaphore (marked: whether the id keeps waiters). The last is the fence when
 * status is 1, else the id's typical hold (0: none).
 */
function acquireReply(reply: unknown, script: Script, length: 3 | 4): AcquireReply {
  if (
    Array.isArray(reply) &&
    reply.length === length &&
    STATUS_REPLIES.includes(reply[0]) &&
    typeof reply[1] === "number" &&
    (reply[0] === 1 ? isFence(reply[length - 1]) : isHold(reply[length - 1]))
  ) {
    const [status, retryAfterMs] = reply as [number, number];
    const last = reply[length - 1] as number;
    if (status === 1) return { acquired: true, retryAfterMs: 0, fence: last };
    return {
      acquired: false,
      retryAfterMs,
      ...(status === 2 ? { queued: true } : {}),
      ...(status === 3 ? { queueFull: true } : {}),
      ...(status === 4 ? { tenantFull: true } : {}),
      ...(last > 0 ? { holdMs: last } : {}),
    };
  }
  throw unexpected(reply, script);
}

function flag(reply: unknown, script: Script): boolean {
  if (reply === 0 || reply === 1) return reply === 1;
  throw unexpected(reply, script);
}

/**
 * A fast path's reply for `count` items: `{-1}` (the id has waiters: take the
 * full path) becomes `undefined` for each; otherwise one number per item, as
 * `valid` allows.
 */
function perItem(reply: unknown, count: number, valid: (n: number) => boolean, script: Script): (number | undefined)[] {
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === -1) return new Array(count).fill(undefined);
    if (reply.length === count && reply.every((n) => typeof n === "number" && valid(n))) return reply as number[];
  }
  throw unexpected(reply, script);
}

const isFlagNumber = (n: number): boolean => n === 0 || n === 1;

/**
 * A take's answer per call: 0 and the fence when held; positive ms (refused)
 * or negative ms (refused for the tenant's cap) and the id's typical hold (0:
 * none). Undefined: take the full path.
 */
type TakeAnswer = { refusedFor: number; fenceOrHold: number } | undefined;

function takeAnswers(reply: unknown, count: number, script: Script): TakeAnswer[] {
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === -1) return new Array(count).fill(undefined);
    if (reply.length === count * 2) {
      const answers: TakeAnswer[] = [];
      for (let i = 0; i < reply.length; i += 2) {
        const [refusedFor, fenceOrHold] = [reply[i], reply[i + 1]];
        const valid = Number.isSafeInteger(refusedFor) && (refusedFor === 0 ? isFence(fenceOrHold) : isHold(fenceOrHold));
        if (!valid) throw unexpected(reply, script);
        answers.push({ refusedFor, fenceOrHold });
      }
      return answers;
    }
  }
  throw unexpected(reply, script);
}

/** A release's hold as the scripts take it: whole ms, or -1 when not known (lua/lib/hold.lua). */
const heldArgument = (heldMs: number | undefined): number => (heldMs === undefined || !(heldMs >= 0) ? -1 : Math.round(heldMs));

const WAITER_STATUS: Record<number, WaiterStatus> = { 0: "gone", 1: "held", 2: "waiting" };

/** A status and a fence (0 unless held) per token, then the ms until the nearest lease ends. */
function refreshed(reply: unknown, count: number, script: Script): WaiterRefresh {
  if (Array.isArray(reply) && reply.length === count * 2 + 1 && typeof reply[count * 2] === "number") {
    const statuses: WaiterStatus[] = [];
    const fences: number[] = [];
    for (let i = 0; i < count * 2; i += 2) {
      const status = WAITER_STATUS[reply[i]];
      const fence = reply[i + 1];
      if (status === undefined || !(status === "held" ? isFence(fence) : fence === 0)) throw unexpected(reply, script);
      statuses.push(status);
      fences.push(fence);
    }
    return { statuses, fences, retryAfterMs: reply[count * 2] };
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
  const error = new Error(`unexpected reply ${JSON.stringify(reply)} from ${script.name}`);
  // The server answered, wrongly: not a sign that it is unreachable (see src/breaker.ts).
  error.name = "UnexpectedReply";
  return error;
}

/**
 * The keys of a semaphore (see lua/lib/holders.lua and queue.lua), all in its hash slot: the
 * holders set, the meta hash (waiters' weights and limits, the id's limit, the turn served), the
 * queue, the waiter lease ends, the tenants' permits and the tenants' turns. The fast paths
 * declare the first (and the tenants' permits when a caller has a tenant).
 */
const semaphoreKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`];
const lockKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`];
/** A fast path's keys: the holders, and the tenants' permits when one of the tokens has a tenant. */
const fastKeys = (key: string, tenanted: boolean): string[] => (tenanted ? [key, `${key}:t`] : [key]);
/**
 * Whether a fast call must declare the tenants' index: the id is remembered as having tenants, or
 * one of its tokens has one (the memory of ids is bounded and starts over: a tenant lease released
 * without the index would leave its tenant counting permits nobody holds).
 */
const withTenant = (items: readonly { token: string }[]): boolean => items.some((item) => item.token.includes("@"));
/** Where grants on a key are announced (the scripts derive the same name). */
const channelOf = (key: string): string => `${key}:ch`;

/** In-flight calls of one kind on one id from which further calls are gathered into one. */
const COALESCE_FROM = 2;
/** Ids remembered as having waiters; past this, forgetting costs one round trip. */
const CONTENDED_IDS = 10_000;

interface Take {
  token: string;
  limit: number;
  weight: number;
  leaseMs: number;
  /** The tenant's cap, 0 for none. */
  tenantLimit: number;
}

interface Renewal {
  token: string;
  leaseMs: number;
  weight: number;
}

class RedisLeaseStore implements RedisStore {
  readonly kind = "redis";
  #subscriber: Subscriber | undefined;
  readonly #channels = new Map<string, { listeners: Set<(grant: Grant) => void>; ready: Promise<unknown> }>();
  #idle: NodeJS.Timeout | undefined;
  // Plain fields, not #private (see `scripts`): every call checks them.
  private closed = false;
  private closing: Promise<void> | undefined;
  // A plain field, not #private: wrappers made with Object.create(store) must keep working.
  private readonly scripts: Scripts;
  /**
   * Ids whose fast path last answered "waiters here": their fail-fast acquires
   * and releases go straight to the full script rather than trying the fast one
   * first. Only a hint: the fast scripts check for waiters themselves.
   */
  private readonly contended = new Set<string>();
  /**
   * Ids with tenants (this process acquired for one, or a fast path said so): their fast calls
   * declare the tenants' index too, so that any of them can prune a tenant's lapsed permits.
   */
  private readonly tenanted = new Set<string>();
  // One group per id: the calls of one turn go out in the order they were made.
  private readonly takes: Coalescer<Take, TakeAnswer>;
  private readonly returns: Coalescer<{ token: string; weight: number; heldMs: number }, number | undefined>;
  private readonly extends: Coalescer<Renewal, number | undefined>;

  constructor(
    readonly client: RedisClient,
    readonly timeoutMs: number,
    readonly waiterLeaseMs: number,
    table: Scripts,
  ) {
    this.scripts = table;
    this.takes = new Coalescer(COALESCE_FROM, async (key, calls) => {
      const script = this.scripts.semaphoreTake;
      const args = calls.flatMap((call) => [call.token, call.limit, call.weight, call.leaseMs, call.tenantLimit]);
      const reply = await this.run(script, fastKeys(key, this.tenanted.has(key) || withTenant(calls)), args);
      if (Array.isArray(reply) && reply.length === 1 && reply[0] === -2) {
        // Tenants hold on this id: declare their index from now on, and ask again.
        this.#remember(this.tenanted, key);
        return takeAnswers(await this.run(script, fastKeys(key, true), args), calls.length, script);
      }
      const replies = takeAnswers(reply, calls.length, script);
      this.#contention(key, replies[0] === undefined);
      return replies;
    });
    this.returns = new Coalescer(COALESCE_FROM, async (key, leases) => {
      const script = this.scripts.semaphoreReturn;
      const args = leases.flatMap((lease) => [lease.token, lease.weight, lease.heldMs]);
      const replies = perItem(
        await this.run(script, fastKeys(key, this.tenanted.has(key) || withTenant(leases)), args),
        leases.length,
        isFlagNumber,
        script,
      );
      this.#contention(key, replies[0] === undefined);
      return replies;
    });
    this.extends = new Coalescer(COALESCE_FROM, async (key, renewals) => {
      const script = this.scripts.semaphoreExtend;
      const args = renewals.flatMap((renewal) => [renewal.token, renewal.leaseMs, renewal.weight]);
      return perItem(await this.run(script, [key], args), renewals.length, isFlagNumber, script);
    });
  }

  /** Every script call of the store: refused once it is closed. */
  private run(script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new ShutdownError(this.kind));
    return runScript(this.client, script, keys, args);
  }

  close(): Promise<void> {
    this.closing ??= this.#close();
    return this.closing;
  }

  async #close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.#idle);
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    const channels = [...this.#channels.keys()];
    this.#channels.clear();
    if (subscriber === undefined) return;
    // A cluster's subscriptions live on your client (node-redis): leave them before letting go.
    const leaving = Promise.all(channels.map((channel) => subscriber.unsubscribe(channel).catch(() => {})));
    await withTimeout(leaving, this.timeoutMs).catch(() => {});
    // Resolved once the connection has ended (at most a timeout later: it is ended either way).
    await withTimeout(subscriber.close(), this.timeoutMs).catch(() => {});
  }

  #contention(key: string, contended: boolean): void {
    if (contended) this.#remember(this.contended, key);
    else this.contended.delete(key);
  }

  /** Adds to a bounded set of ids: past its bound it starts over (forgetting costs a round trip, never a wrong path). */
  #remember(ids: Set<string>, key: string): void {
    if (ids.size >= CONTENDED_IDS) ids.clear();
    ids.add(key);
  }

  async semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply> {
    if (token.includes("@")) this.#remember(this.tenanted, key);
    if (queue === undefined && !this.contended.has(key)) {
      // Almost every request: one declared key, gathered with the others of the same turn on this id.
      const answer = await this.takes.call(key, { token, limit, weight, leaseMs, tenantLimit: tenant?.limit ?? 0 });
      if (answer !== undefined) {
        const { refusedFor, fenceOrHold } = answer;
        if (refusedFor === 0) return { acquired: true, retryAfterMs: 0, fence: fenceOrHold };
        const hold = fenceOrHold > 0 ? { holdMs: fenceOrHold } : {};
        if (refusedFor > 0) return { acquired: false, retryAfterMs: refusedFor, ...hold };
        return { acquired: false, tenantFull: true, retryAfterMs: -refusedFor, ...hold };
      }
    }
    const script = this.scripts.semaphoreAcquire;
    const args = [
      token,
      limit,
      weight,
      leaseMs,
      queue?.claimMs ?? 0,
      queue?.maxQueue ?? 0,
      tenant?.limit ?? 0,
      tenant?.maxQueue ?? 0,
    ];
    const raw = await this.run(script, semaphoreKeys(key), args);
    const reply = acquireReply(raw, script, 4);
    this.#contention(key, (raw as unknown[])[2] === 1);
    return reply;
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number, weight?: number): Promise<boolean> {
    // Weight 0: not known, the script counts the lease's permits itself.
    const extended = await this.extends.call(key, { token, leaseMs, weight: weight ?? 0 });
    return extended === 1;
  }

  async semaphoreRelease(key: string, token: string, weight?: number, heldMs?: number): Promise<boolean> {
    const held = heldArgument(heldMs);
    if (weight !== undefined && !this.contended.has(key)) {
      const returned = await this.returns.call(key, { token, weight, heldMs: held });
      if (returned !== undefined) return returned === 1;
    }
    const script = this.scripts.semaphoreRelease;
    const reply = await this.run(script, semaphoreKeys(key), [token, weight ?? 0, held]);
    if (Array.isArray(reply) && (reply.length === 2 || reply.length === 3) && (reply[1] === 0 || reply[1] === 1)) {
      this.#contention(key, reply[1] === 1);
      if (typeof reply[2] === "string") this.#announced(key, reply[2]);
      return flag(reply[0], script);
    }
    throw unexpected(reply, script);
  }

  async semaphoreCount(key: string): Promise<number> {
    const reply = await this.run(this.scripts.semaphoreCount, [key], []);
    if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0) return reply;
    throw unexpected(reply, this.scripts.semaphoreCount);
  }

  async semaphoreStats(key: string, tenant?: string): Promise<SemaphoreFigures> {
    const script = this.scripts.semaphoreStats;
    const reply = await this.run(script, semaphoreKeys(key), tenant === undefined ? [] : [tenant]);
    const length = tenant === undefined ? 4 : 3;
    if (Array.isArray(reply) && reply.length === length && reply.every((n) => Number.isInteger(n) && n >= 0)) {
      const [used, holders, waiting, tenants] = reply as number[];
      return {
        used: used as number,
        holders: holders as number,
        waiting: waiting as number,
        ...(tenants === undefined ? {} : { tenants }),
      };
    }
    throw unexpected(reply, script);
  }

  async lockStats(key: string): Promise<LockStats> {
    const script = this.scripts.lockStats;
    const reply = await this.run(script, [key], []);
    if (Array.isArray(reply) && reply.length === 2 && (reply[0] === 0 || reply[0] === 1) && Number.isInteger(reply[1])) {
      return { held: reply[0] === 1, expiresInMs: reply[1] as number };
    }
    throw unexpected(reply, script);
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    const script = this.scripts.semaphoreInspect;
    return inspection(await this.run(script, semaphoreKeys(key), []), script);
  }

  async lockInspect(key: string): Promise<Inspection> {
    const script = this.scripts.lockInspect;
    return inspection(await this.run(script, lockKeys(key), []), script);
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    await this.run(this.scripts.semaphoreLeave, semaphoreKeys(key), [token]);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.semaphoreRefreshWaiters;
    return refreshed(await this.run(script, semaphoreKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    const script = this.scripts.lockAcquire;
    const args = [token, ttlMs, queue?.claimMs ?? 0, queue?.maxQueue ?? 0];
    return acquireReply(await this.run(script, lockKeys(key), args), script, 3);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const script = this.scripts.lockExtend;
    return flag(await this.run(script, [key], [token, ttlMs]), script);
  }

  async lockRelease(key: string, token: string, heldMs?: number): Promise<boolean> {
    const script = this.scripts.lockRelease;
    const held = heldArgument(heldMs);
    return this.#released(await this.run(script, lockKeys(key), [token, held]), key, script);
  }

  async lockLeave(key: string, token: string): Promise<void> {
    await this.run(this.scripts.lockLeave, lockKeys(key), [token]);
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.lockRefreshWaiters;
    return refreshed(await this.run(script, lockKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  /**
   * One subscriber connection per client, shared by every waiter of this
   * process; a channel is subscribed while a local waiter needs it, and the
   * connection is closed a second after the last one leaves.
   */
  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    if (this.closed) throw new ShutdownError(this.kind);
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

  #connect(): Subscriber | undefined {
    clearTimeout(this.#idle);
    if (this.#subscriber !== undefined) return this.#subscriber;
    const subscriber = scriptClient(this.client).subscriber((channel, message) => this.#deliver(channel, message));
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
      this.#subscriber.close().catch(() => {});
      this.#subscriber = undefined;
    }, 1000);
    this.#idle.unref();
  }
}

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
  return { tokens, fences, reservedMs: Number(reserved) || waiterLeaseMs };
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
 * holds across every process that points at the same server. Passing a
 * Redis client (ioredis, iovalkey or node-redis) as `client` wraps it in one
 * of these with the defaults; call it yourself to change them.
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
  if (!isRedisClient(client)) {
    throw new ValidationError("client", `redisStore(client) needs a Redis client: ${ACCEPTED_CLIENTS}.`);
  }
  const given = optionsObject(options, "redisStore");
  knownOptions(given, ["timeoutMs", "waiterLeaseMs"], "redisStore");
  const timeoutMs =
    given.timeoutMs === undefined
      ? STORE_TIMEOUT_MS
      : positiveMs("timeoutMs", given.timeoutMs, "Pass the longest a Redis round trip may take before failing, e.g. 2000.");
  const waiterLeaseMs =
    given.waiterLeaseMs === undefined
      ? WAITER_LEASE_MS
      : positiveMs(
          "waiterLeaseMs",
          given.waiterLeaseMs,
          "Pass how long a waiter stays queued without its process refreshing it, e.g. 5000.",
        );
  return new RedisLeaseStore(client, timeoutMs, waiterLeaseMs, table);
}
