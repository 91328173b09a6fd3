import { LeaseholdError, StorePermissionError, StoreUnavailableError } from "../../errors/index.js";
import { channels } from "../../observability/events.js";
import type { StoreErrorEvent, Subject } from "../../observability/types.js";
import { WAITER_LEASE_MS } from "../../options/defaults.js";
import type { QueueOptions } from "../contract/calls.js";
import { isAcquireReply } from "../contract/replies.js";
import { answersInProcess } from "../contract/shape.js";
import type { AcquireReply, Answer, Store } from "../contract/types.js";
import { breakerOf } from "./breaker.js";
import { deadlinesOf, declaredMs, declaredTimeoutMs } from "./deadlines.js";

/**
 * The embedded store itself answers in this process and never hangs: no timer on its path. Every
 * other store is bounded, whatever it declares: a wrapper of the embedded store (a spread, or
 * `Object.create(store)`) inherits its `timeoutMs: 0` but not the promise never to hang, and a
 * declared 0 is what `declaredTimeoutMs` takes as "none" (the 2000 ms default).
 */
function timeoutOf(store: Store): number | undefined {
  return answersInProcess(store) ? undefined : declaredTimeoutMs(store);
}

/** The store's waiter lease (see `QueueOptions.waiterLeaseMs`), or the default. */
export function waiterLeaseOf(store: Store): number {
  return Math.floor(declaredMs(store, "waiterLeaseMs", WAITER_LEASE_MS));
}

/**
 * Calls a store method, so that one that throws instead of rejecting (a
 * custom store need not be async) fails like any other store call.
 */
export function send<T>(call: () => Answer<T>): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Whether a store's answer is still to come: a promise (any thenable), not the value itself. */
export function isPending<T>(answer: Answer<T>): answer is Promise<T> {
  return typeof (answer as { then?: unknown } | undefined)?.then === "function";
}

/**
 * A store call's answer as the engine takes it: a value the store had at once
 * is checked and returned at once (nothing to wait for, so nothing to bound);
 * a promise is bounded as {@link bounded} does. A call that throws, or a value
 * of the wrong shape, fails as a rejected promise: a failure is never on the
 * synchronous path.
 */
export function answered<T>(
  store: Store,
  operation: string,
  call: () => Answer<T>,
  valid: (reply: unknown) => boolean,
  about: { readonly subject: Subject },
): Answer<T> {
  let answer: Answer<T>;
  try {
    answer = call();
  } catch (error) {
    return bounded(store, operation, Promise.reject(error), valid, about.subject);
  }
  // The subject is made only for a failure or a wait: an answer at once needs none.
  if (!isPending(answer) && valid(answer)) {
    breakerOf(store)?.answered();
    return answer;
  }
  return bounded(store, operation, answer as Promise<T>, valid, about.subject);
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

/** A failed store call as the error callers see (published); a leasehold error passes through as it is. */
export function failed(store: Store, operation: string, error: unknown, subject?: Subject): Error {
  if (error instanceof StorePermissionError) {
    // The store's own error, with the fix in its message: published as it is.
    if (channels.storeError.hasSubscribers) {
      channels.storeError.publish({ store: store.kind, operation, error, ...subject } satisfies StoreErrorEvent);
    }
    return error;
  }
  if (error instanceof LeaseholdError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return storeFailure(store, operation, `the ${store.kind} store failed ${operation}: ${reason}`, error, subject);
}

/** A reply as the error message shows it: short, and never a second failure (JSON.stringify throws on a BigInt or a cycle). */
function shown(reply: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(reply);
  } catch {
    // Described below instead.
  }
  text ??= typeof reply === "function" ? "a function" : String(reply);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** A reply that is not what `operation` answers, as a store failure (published like any other). */
export function badReply(store: Store, operation: string, reply: unknown, subject?: Subject): StoreUnavailableError {
  return storeFailure(
    store,
    operation,
    `the ${store.kind} store answered ${operation} with ${shown(reply)}, which is not a valid reply. Is it a leasehold store?`,
    undefined,
    subject,
  );
}

function checked<T>(store: Store, operation: string, reply: T, valid: (reply: unknown) => boolean, subject?: Subject): T {
  if (valid(reply)) return reply;
  throw badReply(store, operation, reply, subject);
}

/**
 * Awaits one store round trip under the store's time bound, and turns every
 * failure (a refused connection, a timeout, a reply of the wrong shape) into
 * a `StoreUnavailableError`, so callers see one error type and a bounded wait.
 * `spentMs`: how much of the bound a caller already used up (a wait's last
 * call, made after the wait ran out), so the call gets only the rest; at
 * least 1 ms, and the command is sent either way.
 * Not an async function: on the embedded store's hot path it adds one promise,
 * not a frame and its closures.
 */
export function bounded<T>(
  store: Store,
  operation: string,
  pending: Answer<T>,
  valid: (reply: unknown) => boolean,
  subject?: Subject,
  spentMs = 0,
): Promise<T> {
  return boundedOr(store, operation, pending, valid, subject, spentMs, undefined);
}

/**
 * `bounded`, and `onFailure` runs on any failure before the caller hears of it: the acquire's
 * clean-up, without a `.catch` (a promise and a closure) on every call.
 */
function boundedOr<T>(
  store: Store,
  operation: string,
  pending: Answer<T>,
  valid: (reply: unknown) => boolean,
  subject: Subject | undefined,
  spentMs: number,
  onFailure: (() => void) | undefined,
): Promise<T> {
  const bound = timeoutOf(store);
  const limit = bound === undefined ? undefined : Math.max(1, Math.ceil(bound - spentMs));
  // Every answer says the store is up; a call that could not reach it takes it down. Told from the
  // handlers below, not a chain of its own: no promise more per call. (An answer after our timeout
  // is not heard; the breaker's probe follows within 2 s.)
  const breaker = breakerOf(store);
  if (limit === undefined) {
    // Promise.resolve is the promise itself when it is one; a store that answers a plain value still works.
    return Promise.resolve(pending).then(
      (reply) => {
        breaker?.answered();
        if (onFailure === undefined || valid(reply)) return checked(store, operation, reply, valid, subject);
        onFailure();
        throw badReply(store, operation, reply, subject);
      },
      (error: unknown) => {
        breaker?.failed(error);
        onFailure?.();
        throw failed(store, operation, error, subject);
      },
    );
  }
  const deadlines = deadlinesOf(store);
  // A call left with a sliver of the bound (a wait's leave after the event loop stalled past its
  // deadline) timing out says nothing of the store: only a call given most of it takes it down.
  const judges = limit * 2 >= (bound as number);
  return new Promise<T>((resolve, reject) => {
    const expire = () => {
      const error = storeFailure(
        store,
        operation,
        `the ${store.kind} store did not answer ${operation} within ${limit} ms. Check that it is reachable; redisStore(client, { timeoutMs }) sets this bound.`,
        undefined,
        subject,
      );
      error.unreachable = true;
      if (judges) breaker?.failed(error);
      onFailure?.();
      reject(error);
    };
    // One timer per store for all its calls out, not one per call (deadlines.ts).
    const entry = deadlines.add(performance.now() + limit, expire);
    Promise.resolve(pending).then(
      (reply) => {
        if (!deadlines.settle(entry)) return;
        breaker?.answered();
        if (valid(reply)) return resolve(reply);
        onFailure?.();
        reject(badReply(store, operation, reply, subject));
      },
      (error: unknown) => {
        if (!deadlines.settle(entry)) return;
        breaker?.failed(error);
        onFailure?.();
        reject(failed(store, operation, error, subject));
      },
    );
  });
}

/** A leave answers nothing the engine reads: any answer is an answer. */
const isAnswer = (): boolean => true;

const ignore = (): void => {};

/** The calls the acquire path makes on one key (the engine's `LeaseCall`). */
export interface AcquireCalls {
  readonly subject: Subject;
  readonly kind: "semaphore" | "lock";
  /** The store key (`{prefix:kind:id}`). */
  readonly storeKey: string;
  /** `madeAt`: see `FreshToken`. */
  take(store: Store, token: string, queue?: QueueOptions, madeAt?: number): Answer<AcquireReply>;
  /** Leave the queue and return anything held. */
  leave(store: Store, token: string): Answer<void>;
}

/**
 * Leaves the queue and returns anything `token` holds (token-checked, so it
 * can free nobody else's permit), under the store's bound less `spentMs`.
 */
export function leave(store: Store, ops: AcquireCalls, token: string, spentMs = 0): Promise<void> {
  return bounded(
    store,
    "leave",
    send(() => ops.leave(store, token)),
    isAnswer,
    ops.subject,
    spentMs,
  );
}

/**
 * For a token nobody will use any more: when `answer`, an acquire whose
 * outcome was not known in time, turns out to have taken a permit or a place
 * in the queue, gives it back. (ioredis re-sends unanswered commands after a
 * reconnect, so such an answer can come after a leave already sent.)
 */
export function leaveIfTaken(store: Store, ops: AcquireCalls, token: string, answer: Promise<AcquireReply>): void {
  answer
    .then((reply) => (reply?.acquired === true || reply?.queued === true ? leave(store, ops, token) : undefined))
    .catch(ignore);
}

/**
 * Runs an acquire whose outcome may stay unknown (a timeout, a dropped
 * connection, a garbled reply). Then the token may hold a permit nobody will
 * use, so it leaves now, and again if the acquire answers late. The lease's
 * own expiry is the backstop if the store never listens again.
 */
export function acquireOrCleanUp(
  store: Store,
  ops: AcquireCalls,
  token: string,
  queue?: QueueOptions,
  madeAt?: number,
): Answer<AcquireReply> {
  const breaker = breakerOf(store);
  try {
    // A store known to be unreachable refuses at once: nothing is sent, so nothing needs cleaning up.
    breaker?.admit(ops.kind, ops.storeKey);
  } catch (error) {
    return Promise.reject(error);
  }
  let pending: Answer<AcquireReply>;
  try {
    pending = ops.take(store, token, queue, madeAt);
  } catch (error) {
    pending = Promise.reject(error);
  }
  // Answered at once (a store in this process): nothing to bound; a reply of the wrong shape fails below.
  if (!isPending(pending) && isAcquireReply(pending)) {
    breaker?.answered();
    return pending;
  }
  return boundedOr(store, "acquire", pending, isAcquireReply, ops.subject, 0, () => {
    // Runs before the caller hears of the failure, inside the bound's handlers: it must not throw.
    try {
      leave(store, ops, token).catch(ignore);
      leaveIfTaken(store, ops, token, Promise.resolve(pending));
    } catch {
      // The lease's own expiry is the backstop.
    }
  });
}
