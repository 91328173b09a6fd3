import { randomFillSync } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { offAbort, onAbort } from "./aborts.js";
import type { StoreSource } from "./client.js";
import type { NotAcquiredReason } from "./errors.js";
import { type AcquiredEvent, channels, type RejectedEvent, type Subject, subjectOf } from "./events.js";
import type { CallSettings } from "./options.js";
import { stampToken, type TokenTag } from "./owner.js";
import { isMemoryStore, type LocalStore } from "./store/memory.js";
import type { AcquireReply, QueueOptions, Store, TenantOptions } from "./store/types.js";
import { acquireOrCleanUp, leave, waiterLeaseOf } from "./store-call.js";
import { type Due, foregroundTimers } from "./timers.js";
import { WaitEnded, waitForGrant } from "./waiting.js";
import type { WaitingCalls } from "./waiting-calls.js";

const TOKEN_BYTES = 16;
const POOL_TOKENS = 256;
const pool = Buffer.alloc(TOKEN_BYTES * POOL_TOKENS);
let poolOffset = pool.length;

/**
 * A fresh lease token: 128 bits from the system CSPRNG, so no other holder
 * can guess or collide with it. Random bytes are drawn 4 KiB at a time (one
 * call into the CSPRNG per 256 tokens, rather than one per token, which
 * would cost more than the rest of an in-memory acquire); every token still
 * uses its own fresh bytes.
 */
export function newToken(): string {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const token = pool.toString("base64url", poolOffset, poolOffset + TOKEN_BYTES);
  poolOffset += TOKEN_BYTES;
  return token;
}

/** The store key of an id: a Redis Cluster hash tag around prefix and id, so every companion key shares its slot. */
export function storeKey(prefix: string, id: string): string {
  return `{${prefix}:${id}}`;
}

/** Ids remembered per primitive before the cache starts over. */
const CACHED_KEYS = 10_000;

/**
 * The store keys of the ids one primitive sees, each made once: the same
 * string object each time, so a store hashes it once for its lookups (a new
 * string per call was a measurable share of an in-memory acquire).
 */
export class StoreKeys {
  readonly #keys = new Map<string, string>();

  constructor(readonly prefix: string) {}

  of(id: string): string {
    let key = this.#keys.get(id);
    if (key === undefined) {
      if (this.#keys.size >= CACHED_KEYS) this.#keys.clear();
      key = storeKey(this.prefix, id);
      this.#keys.set(id, key);
    }
    return key;
  }
}

/** Why no lease was had: every permit taken (fail fast or spin), the queue at `maxQueue`, or `waitMs` spent. */
export type RefusalReason = NotAcquiredReason;

/**
 * A lease had: it runs a full lease from `sentAt`, or, handed off from the
 * queue without a claim round trip, until `until` at least, to be confirmed
 * (see `waitForGrant`).
 */
export type Acquired = {
  acquired: true;
  store: Store;
  token: string;
  /** The grant's fence (see `Lease.fence`). */
  fence: number;
  sentAt: number;
  waitedMs: number;
  until?: number;
};
/**
 * A refusal. `retryAfterMs` is the estimate ({@link retryEstimateMs}), from
 * the id's typical hold (`holdMs`, the store's record) and the nearest lease
 * end (`expiresInMs`).
 */
export type Refused = {
  acquired: false;
  retryAfterMs: number;
  holdMs: number | undefined;
  expiresInMs: number;
  reason: RefusalReason;
  waitedMs: number;
};

/** When nobody has observed a hold on the id lately: retry after a second rather than a whole lease. */
export const RETRY_AFTER_DEFAULT_MS = 1000;

/**
 * When a retry is likely to succeed: the typical hold (or, unknown, the
 * default), never later than the nearest lease end, the latest a permit frees.
 */
export function retryEstimateMs(holdMs: number | undefined, expiresInMs: number): number {
  return Math.min(holdMs ?? RETRY_AFTER_DEFAULT_MS, expiresInMs);
}

/** The store calls of one primitive on one key. */
export interface KeyOps extends WaitingCalls {
  /** Who is acquiring, for events. */
  readonly subject: Subject;
  /** What each acquisition asks for (a lock: 1 and 1). */
  readonly limit: number;
  readonly weight: number;
  readonly leaseMs: number;
  /** The caller's tenant and its share (a semaphore call that passed one). */
  readonly tenant?: Tenant | undefined;
  /** What the token carries after its random part and acquire time: owner (and limit), see `ownerTag`. */
  readonly tag: TokenTag;
  /** A semaphore's limit and weight, for events. */
  readonly permits?: { limit: number; weight: number };
}

/**
 * What the store calls of one acquisition share, whatever the primitive: who
 * they are for (the event subject, made on first use) and, once acquired,
 * the store the lease lives in. One object per call, with methods, rather
 * than a closure per operation.
 */
export abstract class KeyCalls {
  /** Set once acquired. */
  store!: Store;
  #subject: Subject | undefined;

  constructor(
    readonly kind: "semaphore" | "lock",
    readonly id: string,
    readonly key: string,
    readonly leaseMs: number,
    readonly tag: TokenTag,
    readonly tenant?: Tenant,
  ) {}

  get subject(): Subject {
    this.#subject ??= subjectOf(this.kind, this.id, this.tenant?.name);
    return this.#subject;
  }
}

/** A tenant and its share of an id, as one semaphore call asks for them. */
export interface Tenant extends TenantOptions {
  name: string;
}

/**
 * Takes a lease in one of three modes. Fail fast (default): one attempt.
 * Spin (`retries`): `1 + retries` attempts, `retryDelayMs` apart. Queue
 * (`waitMs`): join the id's FIFO queue and wait for the store to grant,
 * woken by notification. One token throughout, so a late answer to an
 * earlier attempt is the same lease. `sentAt` is when the winning attempt
 * was sent: the lease's deadline counts from there.
 */
export function acquireLease(
  source: StoreSource,
  settings: CallSettings,
  ops: KeyOps,
): Acquired | Refused | Promise<Acquired | Refused> {
  settings.signal?.throwIfAborted();
  const startedAt = performance.now();
  const got = source.get();
  if (got instanceof Promise) return got.then((store) => acquireFrom(store, settings, ops, startedAt));
  return acquireFrom(got, settings, ops, startedAt);
}

/**
 * The embedded store's fail-fast acquire answers in the same turn, with no
 * promise at all (the common in-process case, and a measurable share of it);
 * everything else is asynchronous.
 */
function acquireFrom(
  store: Store,
  settings: CallSettings,
  ops: KeyOps,
  startedAt: number,
): Acquired | Refused | Promise<Acquired | Refused> {
  // The token says who took the lease and when (for `holders`, at no extra store cost); a tenant's
  // lease carries its tenant too: every later call on the lease counts against it.
  const token = stampToken(newToken(), ops.tag, ops.tenant?.name, startedAt);
  if (!isMemoryStore(store)) return acquireRemotely(store, settings, ops, token, startedAt);
  if (settings.waitMs > 0 || settings.retries > 0) return acquireLocally(store, settings, ops, token, startedAt);
  const reply = store.takeNow(ops.kind, ops.key, token, ops.limit, ops.weight, ops.leaseMs, ops.tenant);
  return reply.acquired
    ? acquired(ops, store, token, reply, startedAt, startedAt, 0)
    : refused(ops, reply, why(reply), startedAt);
}

/** The reason of a refusal that was not a full queue. */
const why = (reply: AcquireReply): RefusalReason => (reply.tenantFull === true ? "tenant-full" : "full");

async function acquireRemotely(
  store: Store,
  settings: CallSettings,
  ops: KeyOps,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  const { signal } = settings;

  // Fail fast, the common case, without the closures the other modes need.
  if (settings.waitMs === 0 && settings.retries === 0) {
    const sentAt = performance.now();
    const reply = await acquireOrCleanUp(store, ops, token);
    if (signal?.aborted) await abandon(store, ops, token, signal);
    return reply.acquired ? acquired(ops, store, token, reply, sentAt, startedAt) : refused(ops, reply, why(reply), startedAt);
  }

  const attempt = async (queue?: QueueOptions): Promise<AcquireReply> => {
    const reply = await acquireOrCleanUp(store, ops, token, queue);
    if (signal?.aborted) await abandon(store, ops, token, signal);
    return reply;
  };

  if (settings.waitMs > 0) {
    const queue: QueueOptions = { waiterLeaseMs: waiterLeaseOf(store), maxQueue: settings.maxQueue };
    const sentAt = performance.now();
    // Joining: a failure here ends the call, with the clean-up of an unknown outcome.
    const reply = await attempt(queue);
    if (reply.acquired) return acquired(ops, store, token, reply, sentAt, startedAt);
    if (reply.queued !== true) {
      return refused(ops, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt);
    }
    try {
      const granted = await waitForGrant({
        store,
        ops,
        token,
        queue,
        deadline: startedAt + settings.waitMs,
        signal,
        retryAfterMs: reply.retryAfterMs,
        joinedAt: sentAt,
      });
      const had = acquired(ops, store, token, granted, "sentAt" in granted ? granted.sentAt : sentAt, startedAt);
      if ("until" in granted) had.until = granted.until;
      return had;
    } catch (error) {
      // The nearest lease end as the last look at the queue found it; the typical hold as the join did.
      if (error instanceof WaitEnded) {
        return refused(ops, { retryAfterMs: error.retryAfterMs, holdMs: reply.holdMs }, error.reason, startedAt);
      }
      throw error;
    }
  }

  for (let count = 0; ; count++) {
    const sentAt = performance.now();
    const reply = await attempt();
    if (reply.acquired) return acquired(ops, store, token, reply, sentAt, startedAt);
    if (count >= settings.retries) return refused(ops, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, signal);
  }
}

/**
 * The embedded store answers at once, and hands a freed permit straight to a
 * waiter of this process: no round trip to bound, no waiting room to share,
 * no grant to announce and claim. Same modes, same outcomes.
 */
async function acquireLocally(
  store: LocalStore,
  settings: CallSettings,
  ops: KeyOps,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  const { kind, key, limit, weight, leaseMs } = ops;
  if (settings.waitMs > 0) return waitLocally(store, settings, ops, token, startedAt);
  for (let count = 0; ; count++) {
    const sentAt = performance.now();
    const reply = store.takeNow(kind, key, token, limit, weight, leaseMs, ops.tenant);
    if (reply.acquired) return acquired(ops, store, token, reply, sentAt, startedAt);
    if (count >= settings.retries) return refused(ops, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, settings.signal);
    settings.signal?.throwIfAborted();
  }
}

/**
 * Queues as a waiter of this process: a release hands it the permit, with a
 * full lease, from inside the releasing call (which only resolves this
 * promise: the rest runs after it). One shared timer per millisecond bounds
 * `waitMs`.
 */
function waitLocally(
  store: LocalStore,
  settings: CallSettings,
  ops: KeyOps,
  token: string,
  startedAt: number,
): Promise<Acquired | Refused> {
  const { kind, key, limit, weight, leaseMs } = ops;
  const { signal } = settings;
  const until = startedAt + settings.waitMs;
  return new Promise<{ at: number; fence: number } | Refused>((resolve, reject) => {
    let timer: Due | undefined;
    let done = false;
    const end = (): boolean => {
      if (done) return false;
      done = true;
      foregroundTimers.cancel(timer);
      foregroundTimers.cancel(backup);
      if (signal !== undefined) offAbort(signal, aborted);
      return true;
    };
    const aborted = (): void => {
      if (!end()) return;
      store.leaveNow(kind, key, token);
      reject(signal?.reason);
    };
    // A holder whose lease lapses (it stalled, or stopped renewing) frees its permit only when
    // something looks: look when the nearest lease ends, and again then if it was renewed.
    let backup: Due | undefined;
    const lookAt = (retryAfterMs: number): void => {
      backup = foregroundTimers.at(performance.now() + retryAfterMs, () => {
        backup = undefined;
        if (done) return;
        const next = store.settleNow(kind, key);
        if (!done) lookAt(next);
      });
    };
    const sentAt = performance.now();
    const join = {
      leaseMs,
      until,
      maxQueue: settings.maxQueue,
      onGrant: (at: number, fence: number) => {
        if (end()) resolve({ at, fence });
      },
    };
    const reply = store.waitNow(kind, key, token, limit, weight, join, ops.tenant);
    if (reply.acquired) {
      end();
      resolve({ at: sentAt, fence: reply.fence as number });
      return;
    }
    if (reply.queued !== true) {
      end();
      resolve(refused(ops, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt));
      return;
    }
    timer = foregroundTimers.at(until, () => {
      if (!end()) return;
      store.leaveNow(kind, key, token);
      resolve(refused(ops, reply, "wait-timeout", startedAt));
    });
    lookAt(reply.retryAfterMs);
    if (signal !== undefined) onAbort(signal, aborted);
  }).then((outcome) => ("at" in outcome ? acquired(ops, store, token, outcome, outcome.at, startedAt) : outcome));
}

/**
 * The caller gave up (or the primitive is closing) while an attempt was in
 * flight: nobody will use this permit or place. It is given back before the
 * call rejects, so that a `close()` waiting for the call also waits for it.
 */
async function abandon(store: Store, ops: KeyOps, token: string, signal: AbortSignal): Promise<never> {
  await leave(store, ops, token).catch(() => {});
  throw signal.reason;
}

// Every outcome leaves through one of these two, which also publish it.
/** `grant` carries the fence (a store's reply, or a grant heard while waiting). */
function acquired(
  ops: KeyOps,
  store: Store,
  token: string,
  grant: { fence?: number },
  sentAt: number,
  startedAt: number,
  waitedMs = performance.now() - startedAt,
): Acquired {
  const fence = grant.fence as number;
  if (channels.acquired.hasSubscribers) {
    channels.acquired.publish({ ...ops.subject, token, fence, waitedMs, ...ops.permits } satisfies AcquiredEvent);
  }
  return { acquired: true, store, token, fence, sentAt, waitedMs };
}

/** `reply`: the store's answer (its `retryAfterMs` is the nearest lease end). */
function refused(
  ops: KeyOps,
  reply: { retryAfterMs: number; holdMs?: number | undefined },
  reason: RefusalReason,
  startedAt: number,
): Refused {
  const waitedMs = performance.now() - startedAt;
  if (channels.rejected.hasSubscribers) {
    channels.rejected.publish({
      ...ops.subject,
      reason,
      waitedMs,
      ...(ops.permits && { limit: ops.permits.limit }),
    } satisfies RejectedEvent);
  }
  const { retryAfterMs: expiresInMs, holdMs } = reply;
  return { acquired: false, retryAfterMs: retryEstimateMs(holdMs, expiresInMs), holdMs, expiresInMs, reason, waitedMs };
}

/** Waits between attempts; an abort ends the wait at once with the signal's own reason. */
async function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal === undefined ? undefined : { signal });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  }
}
