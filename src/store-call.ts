import { LeaseholdError, StoreUnavailableError } from "./errors.js";
import { channels, type StoreErrorEvent, type Subject } from "./events.js";
import { isMemoryStore } from "./store/memory.js";
import type { AcquireReply, LockStats, SemaphoreFigures, Store } from "./store/types.js";

/** Default bound for stores that do not name their own (a custom store). */
const DEFAULT_TIMEOUT_MS = 2000;

/** The embedded store answers in the same process and never hangs: no timer on its hot path. */
function timeoutOf(store: Store): number | undefined {
  if (isMemoryStore(store)) return undefined;
  const own = (store as { timeoutMs?: unknown }).timeoutMs;
  return typeof own === "number" && own > 0 ? own : DEFAULT_TIMEOUT_MS;
}

/**
 * Awaits one store round trip under the store's time bound, and turns every
 * failure (a refused connection, a timeout, a reply of the wrong shape) into
 * a `StoreUnavailableError`, so callers see one error type and a bounded wait.
 */
export async function bounded<T>(
  store: Store,
  operation: string,
  pending: Promise<T>,
  valid: (reply: unknown) => boolean,
  subject?: Subject,
): Promise<T> {
  const fail = (message: string, cause?: unknown): StoreUnavailableError => {
    const error = new StoreUnavailableError(message, cause, store.kind);
    if (channels.storeError.hasSubscribers) {
      channels.storeError.publish({ store: store.kind, operation, error, ...subject } satisfies StoreErrorEvent);
    }
    return error;
  };
  const limit = timeoutOf(store);
  let timer: NodeJS.Timeout | undefined;
  let reply: T;
  try {
    if (limit === undefined) {
      reply = await pending;
    } else {
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              fail(
                `the ${store.kind} store did not answer ${operation} within ${limit} ms. Check that it is reachable; redisStore(client, { timeoutMs }) sets this bound.`,
              ),
            ),
          limit,
        );
      });
      reply = await Promise.race([pending, timeout]);
    }
  } catch (error) {
    if (error instanceof LeaseholdError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw fail(`the ${store.kind} store failed ${operation}: ${reason}`, error);
  } finally {
    clearTimeout(timer);
  }
  if (!valid(reply)) {
    throw fail(
      `the ${store.kind} store answered ${operation} with ${JSON.stringify(reply)}, which is not a valid reply. Is it a leasehold store?`,
    );
  }
  return reply;
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
export async function acquireOrCleanUp(
  store: Store,
  attempt: () => Promise<AcquireReply>,
  release: () => Promise<unknown>,
  subject?: Subject,
): Promise<AcquireReply> {
  let pending: Promise<AcquireReply>;
  try {
    pending = attempt();
  } catch (error) {
    pending = Promise.reject(error);
  }
  try {
    return await bounded(store, "acquire", pending, isAcquireReply, subject);
  } catch (error) {
    const ignore = (): void => {};
    Promise.resolve().then(release).catch(ignore);
    pending.then((reply) => (reply?.acquired === true ? release() : undefined)).catch(ignore);
    throw error;
  }
}
