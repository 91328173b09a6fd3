import { LeaseholdError, StoreUnavailableError } from "./errors.js";
import { channels, type StoreErrorEvent, type Subject } from "./events.js";
import { isMemoryStore } from "./store/memory.js";
import type { AcquireReply, LockStats, QueueOptions, SemaphoreFigures, Store } from "./store/types.js";

/** Default bound for stores that do not name their own (a custom store). */
const DEFAULT_TIMEOUT_MS = 2000;

/** The embedded store answers in the same process and never hangs: no timer on its hot path. */
function timeoutOf(store: Store): number | undefined {
  if (isMemoryStore(store)) return undefined;
  const own = (store as { timeoutMs?: unknown }).timeoutMs;
  return typeof own === "number" && own > 0 ? own : DEFAULT_TIMEOUT_MS;
}

/** A store failure as the one error type callers see, published on its channel. */
function storeFailure(
  store: Store,
  operation: string,
  message: string,
  cause?: unknown,
  subject?: Subject,
): StoreUnavailableError {
  const error = new StoreUnavailableError(message, cause, store.kind);
  if (channels.storeError.hasSubscribers) {
    channels.storeError.publish({ store: store.kind, operation, error, ...subject } satisfies StoreErrorEvent);
  }
  return error;
}

function failed(store: Store, operation: string, error: unknown, subject?: Subject): Error {
  if (error instanceof LeaseholdError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return storeFailure(store, operation, `the ${store.kind} store failed ${operation}: ${reason}`, error, subject);
}

function checked<T>(store: Store, operation: string, reply: T, valid: (reply: unknown) => boolean, subject?: Subject): T {
  if (valid(reply)) return reply;
  throw storeFailure(
    store,
    operation,
    `the ${store.kind} store answered ${operation} with ${JSON.stringify(reply)}, which is not a valid reply. Is it a leasehold store?`,
    undefined,
    subject,
  );
}

/**
 * Awaits one store round trip under the store's time bound, and turns every
 * failure (a refused connection, a timeout, a reply of the wrong shape) into
 * a `StoreUnavailableError`, so callers see one error type and a bounded wait.
 * Not an async function: on the embedded store's hot path it adds one promise,
 * not a frame and its closures.
 */
export function bounded<T>(
  store: Store,
  operation: string,
  pending: Promise<T>,
  valid: (reply: unknown) => boolean,
  subject?: Subject,
): Promise<T> {
  const limit = timeoutOf(store);
  if (limit === undefined) {
    // Promise.resolve is the promise itself when it is one; a store that answers a plain value still works.
    return Promise.resolve(pending).then(
      (reply) => checked(store, operation, reply, valid, subject),
      (error: unknown) => {
        throw failed(store, operation, error, subject);
      },
    );
  }
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          storeFailure(
            store,
            operation,
            `the ${store.kind} store did not answer ${operation} within ${limit} ms. Check that it is reachable; redisStore(client, { timeoutMs }) sets this bound.`,
            undefined,
            subject,
          ),
        ),
      limit,
    );
  });
  return Promise.race([pending, timeout]).then(
    (reply) => {
      clearTimeout(timer);
      return checked(store, operation, reply, valid, subject);
    },
    (error: unknown) => {
      clearTimeout(timer);
      throw failed(store, operation, error, subject);
    },
  );
}

export const isFlag = (reply: unknown): boolean => typeof reply === "boolean";

export const isCount = (reply: unknown): boolean => typeof reply === "number" && Number.isSafeInteger(reply) && reply >= 0;

const isWhole = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value >= 0;

export const isFigures = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  isWhole((reply as SemaphoreFigures).used) &&
  isWhole((reply as SemaphoreFigures).holders) &&
  isWhole((reply as SemaphoreFigures).waiting);

export const isLockStats = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  typeof (reply as LockStats).held === "boolean" &&
  isWhole((reply as LockStats).expiresInMs);

export const isAcquireReply = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  typeof (reply as AcquireReply).acquired === "boolean" &&
  typeof (reply as AcquireReply).retryAfterMs === "number" &&
  Number.isFinite((reply as AcquireReply).retryAfterMs) &&
  (reply as AcquireReply).retryAfterMs >= 0;

/**
 * Runs an acquire whose outcome may stay unknown (a timeout, a dropped
 * connection, a garbled reply). Then the token may hold a permit nobody will
 * use, so it is released now, and again if the acquire answers late (ioredis
 * re-sends unanswered commands after a reconnect). The lease's own expiry is
 * the backstop if the store never listens again.
 */
export function acquireOrCleanUp(
  store: Store,
  ops: {
    take(store: Store, token: string, queue?: QueueOptions): Promise<AcquireReply>;
    leave(store: Store, token: string): Promise<unknown>;
    readonly subject: Subject;
  },
  token: string,
  queue?: QueueOptions,
): Promise<AcquireReply> {
  let pending: Promise<AcquireReply>;
  try {
    pending = ops.take(store, token, queue);
  } catch (error) {
    pending = Promise.reject(error);
  }
  return bounded(store, "acquire", pending, isAcquireReply, ops.subject).catch((error: unknown) => {
    const ignore = (): void => {};
    const release = () => ops.leave(store, token);
    Promise.resolve().then(release).catch(ignore);
    Promise.resolve(pending)
      .then((reply) => (reply?.acquired === true ? release() : undefined))
      .catch(ignore);
    throw error;
  });
}
