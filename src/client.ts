import { StoreUnavailableError, ValidationError } from "./errors.js";
import { ACCEPTED_CLIENTS, isRedisClient, type RedisClient } from "./store/clients.js";
import { defaultStore } from "./store/memory.js";
import { redisStore } from "./store/redis.js";
import { isStore, type Store } from "./store/types.js";

/**
 * What `client` accepts: a store, a Redis client (an ioredis or iovalkey
 * `Redis` or `Cluster`, a node-redis `createClient()` or `createCluster()`,
 * recognised by shape), a promise of either, or a function returning either
 * (called once, on first use, and again only if it failed).
 *
 * @example
 * ```ts
 * const client: ClientInput = redisStore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { timeoutMs: 500 });
 * ```
 */
export type ClientInput =
  | Store
  | RedisClient
  | PromiseLike<Store | RedisClient>
  | (() => Store | RedisClient | PromiseLike<Store | RedisClient>);

/** A lazily resolved store: `get()` answers synchronously once resolved. */
export interface StoreSource {
  get(): Store | Promise<Store>;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null && typeof (value as PromiseLike<unknown>).then === "function";
}

const wrapped = new WeakMap<RedisClient, Store>();

/** One store per client, so primitives sharing a client share its script cache. */
function toStore(value: unknown): Store {
  if (isStore(value)) return value;
  if (isRedisClient(value)) {
    let store = wrapped.get(value);
    if (store === undefined) {
      store = redisStore(value);
      wrapped.set(value, store);
    }
    return store;
  }
  throw new ValidationError(
    "client",
    `\`client\` resolved to something that is neither a store nor a Redis client. Pass ${ACCEPTED_CLIENTS}, memoryStore() or redisStore(client).`,
  );
}

/** How long a promised or factory-made client may take to appear. */
const RESOLVE_TIMEOUT_MS = 2000;

/**
 * Turns `client` into a store source. Invalid values throw at once; a promise
 * or factory is resolved on first use, and a failure there is a
 * `StoreUnavailableError` for that call (a factory is asked again next call).
 */
export function storeSource(client: unknown): StoreSource {
  if (client === undefined) {
    const store = defaultStore();
    return { get: () => store };
  }
  if (isStore(client) || isRedisClient(client)) {
    const store = toStore(client);
    return { get: () => store };
  }
  if (!isThenable(client) && typeof client !== "function") {
    throw new ValidationError(
      "client",
      `\`client\` must be a Redis client (${ACCEPTED_CLIENTS}), a promise of one, a function returning one, or a store (memoryStore(), redisStore(client)). Omit it to use the embedded memory store.`,
    );
  }
  let store: Store | undefined;
  let pending: Promise<Store> | undefined;
  const resolve = async (): Promise<Store> => {
    const value = isThenable(client) ? client : (client as () => unknown)();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new StoreUnavailableError(`the client did not resolve within ${RESOLVE_TIMEOUT_MS} ms.`)),
        RESOLVE_TIMEOUT_MS,
      );
    });
    try {
      return toStore(await Promise.race([value, timeout]));
    } catch (error) {
      if (error instanceof ValidationError || error instanceof StoreUnavailableError) throw error;
      throw new StoreUnavailableError("the client could not be created.", error);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    get() {
      if (store !== undefined) return store;
      pending ??= resolve().then(
        (resolved) => {
          store = resolved;
          return resolved;
        },
        (error: unknown) => {
          // A factory may succeed next time; a rejected promise never will, so keep its failure.
          if (typeof client === "function") pending = undefined;
          throw error;
        },
      );
      return pending;
    },
  };
}
