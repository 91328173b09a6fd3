import { ValidationError } from "../errors.js";
import { knownOptions, optionsObject, positiveMs } from "../validate.js";
import { scripts } from "./lua.generated.js";
import type { AcquireReply, Store } from "./types.js";

/**
 * The part of a Redis client leasehold uses, typed structurally so that an
 * ioredis `Redis` or `Cluster` (or any compatible client) fits.
 */
export interface RedisClient {
  evalsha(...args: never[]): Promise<unknown>;
  eval(...args: never[]): Promise<unknown>;
}

type ScriptCall = (script: string, keyCount: number, ...args: (string | number)[]) => Promise<unknown>;
type Script = (typeof scripts)[keyof typeof scripts];

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * The longest one round trip may take before the call fails with
   * `StoreUnavailableError`. Bounds what ioredis would otherwise spend in its
   * offline queue (a minute or more) while Redis is down.
   * @default 2000
   */
  timeoutMs?: number;
}

/** A Store that also says how long its round trips may take. */
export interface RedisStore extends Store {
  readonly kind: "redis";
  readonly timeoutMs: number;
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

function acquireReply(reply: unknown, script: Script): AcquireReply {
  if (Array.isArray(reply) && reply.length === 2 && (reply[0] === 0 || reply[0] === 1) && typeof reply[1] === "number") {
    return { acquired: reply[0] === 1, retryAfterMs: reply[1] };
  }
  throw unexpected(reply, script);
}

function flag(reply: unknown, script: Script): boolean {
  if (reply === 0 || reply === 1) return reply === 1;
  throw unexpected(reply, script);
}

function unexpected(reply: unknown, script: Script): Error {
  return new Error(`unexpected reply ${JSON.stringify(reply)} from ${script.name}`);
}

class RedisLeaseStore implements RedisStore {
  readonly kind = "redis";

  constructor(
    readonly client: RedisClient,
    readonly timeoutMs: number,
  ) {}

  async semaphoreAcquire(key: string, token: string, limit: number, weight: number, leaseMs: number): Promise<AcquireReply> {
    const script = scripts.semaphoreAcquire;
    return acquireReply(await runScript(this.client, script, [key, `${key}:w`], [token, limit, weight, leaseMs]), script);
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number): Promise<boolean> {
    const script = scripts.semaphoreExtend;
    return flag(await runScript(this.client, script, [key, `${key}:w`], [token, leaseMs]), script);
  }

  async semaphoreRelease(key: string, token: string): Promise<boolean> {
    const script = scripts.semaphoreRelease;
    return flag(await runScript(this.client, script, [key, `${key}:w`], [token]), script);
  }

  async semaphoreCount(key: string): Promise<number> {
    const reply = await runScript(this.client, scripts.semaphoreCount, [key], []);
    if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0) return reply;
    throw unexpected(reply, scripts.semaphoreCount);
  }

  async lockAcquire(key: string, token: string, ttlMs: number): Promise<AcquireReply> {
    const script = scripts.lockAcquire;
    return acquireReply(await runScript(this.client, script, [key], [token, ttlMs]), script);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const script = scripts.lockExtend;
    return flag(await runScript(this.client, script, [key], [token, ttlMs]), script);
  }

  async lockRelease(key: string, token: string): Promise<boolean> {
    const script = scripts.lockRelease;
    return flag(await runScript(this.client, script, [key], [token]), script);
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
 * import Redis from "ioredis";
 * import { redisStore, semaphore } from "leasehold";
 * const store = redisStore(new Redis(process.env.REDIS_URL), { timeoutMs: 500 });
 * const slots = semaphore({ client: store, limit: 20 });
 * ```
 */
export function redisStore(client: RedisClient, options: RedisStoreOptions = {}): RedisStore {
  if (typeof client !== "object" || client === null || typeof client.evalsha !== "function") {
    throw new ValidationError("client", "redisStore(client) needs an ioredis Redis or Cluster (anything with evalsha and eval).");
  }
  const given = optionsObject(options, "redisStore");
  knownOptions(given, ["timeoutMs"], "redisStore");
  const timeoutMs =
    given.timeoutMs === undefined
      ? 2000
      : positiveMs("timeoutMs", given.timeoutMs, "Pass the longest a Redis round trip may take before failing, e.g. 2000.");
  return new RedisLeaseStore(client, timeoutMs);
}
