import { StoreUnavailableError, ValidationError } from "../../errors/index.js";
import { CLIENT_RESOLVE_TIMEOUT_MS } from "../../options/defaults.js";
import { isStore, refuseIncompleteStore, refusePositionalStore } from "../contract/shape.js";
import type { Store } from "../contract/types.js";
import { defaultStore } from "../memory/index.js";
import { ACCEPTED_CLIENTS, isRedisClient } from "../redis/clients.js";
import { redisStore } from "../redis/index.js";
import type { RedisClient, RedisStore } from "../redis/types.js";

/** A lazily resolved store: `get()` answers synchronously once resolved. */
export interface StoreSource {
  get(): Store | Promise<Store>;
  /**
   * The primitive using this source is closed: a store leasehold made from a
   * Redis client is closed with the last primitive that used it; a store you
   * passed (or the process-wide embedded one) is left open.
   */
  close(): Promise<void>;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof value === "object" && value !== null && typeof (value as PromiseLike<unknown>).then === "function";
}

/** A store leasehold made over a client, and how many open primitives use it. */
interface Wrapped {
  store: RedisStore;
  users: number;
}

const wrapped = new WeakMap<RedisClient, Wrapped>();

/** What a source resolved to: the store, and the shared wrapper when leasehold made it (to close with its last user). */
interface Resolved {
  store: Store;
  own: Wrapped | undefined;
}

/**
 * One store per client, so primitives sharing a client share its script
 * cache and its subscriber connection; each source that resolves to it counts
 * as a user, and the last to close closes it (its subscriber connection). A
 * later primitive on the same client gets a new one.
 */
function toStore(value: unknown): Resolved {
  refusePositionalStore(value);
  refuseIncompleteStore(value);
  if (isStore(value)) return { store: value, own: undefined };
  if (isRedisClient(value)) {
    let own = wrapped.get(value);
    if (own === undefined) {
      own = { store: redisStore(value), users: 0 };
      wrapped.set(value, own);
    }
    own.users++;
    return { store: own.store, own };
  }
  throw new ValidationError(
    "client",
    `\`client\` resolved to something that is neither a store nor a Redis client. Pass ${ACCEPTED_CLIENTS}, memoryStore() or redisStore(client).`,
  );
}

/** One user of a store is done with it: a store leasehold made is closed by its last user, and forgotten. */
function letGo(client: unknown, resolved: Resolved): Promise<void> {
  const { own } = resolved;
  if (own === undefined || --own.users > 0) return Promise.resolve();
  if (wrapped.get(client as RedisClient) === own) wrapped.delete(client as RedisClient);
  return own.store.close();
}

/**
 * Turns `client` into a store source. Invalid values throw at once; a promise
 * or factory is resolved on first use, and a failure there is a
 * `StoreUnavailableError` for that call (a factory is asked again next call).
 */
export function storeSource(client: unknown): StoreSource {
  if (client === undefined) {
    const store = defaultStore();
    return { get: () => store, close: () => Promise.resolve() };
  }
  refusePositionalStore(client);
  refuseIncompleteStore(client);
  if (isStore(client) || isRedisClient(client)) {
    const resolved = toStore(client);
    let closing: Promise<void> | undefined;
    return {
      get: () => resolved.store,
      close: () => {
        closing ??= letGo(client, resolved);
        return closing;
      },
    };
  }
  if (!isThenable(client) && typeof client !== "function") {
    throw new ValidationError(
      "client",
      `\`client\` must be a Redis client (${ACCEPTED_CLIENTS}), a promise of one, a function returning one, or a store (memoryStore(), redisStore(client)). Omit it to use the embedded memory store.`,
    );
  }
  let store: Store | undefined;
  let pending: Promise<Store> | undefined;
  let made: { value: unknown; resolved: Resolved } | undefined;
  let closed = false;
  const resolve = async (): Promise<Store> => {
    const value = isThenable(client) ? client : (client as () => unknown)();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new StoreUnavailableError(`the client did not resolve within ${CLIENT_RESOLVE_TIMEOUT_MS} ms.`)),
        CLIENT_RESOLVE_TIMEOUT_MS,
      );
    });
    try {
      const given = await Promise.race([value, timeout]);
      const resolved = toStore(given);
      made = { value: given, resolved };
      // Closed while it was being made: a store made for it now is let go at once.
      if (closed) void letGo(given, resolved);
      return resolved.store;
    } catch (error) {
      if (error instanceof ValidationError || error instanceof StoreUnavailableError) throw error;
      throw new StoreUnavailableError("the client could not be created.", error);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    close() {
      if (closed) return Promise.resolve();
      closed = true;
      return made === undefined ? Promise.resolve() : letGo(made.value, made.resolved);
    },
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
