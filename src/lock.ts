import { acquireLease, KeyCalls, type KeyOps, type Refused } from "./acquire.js";
import { breakerOf, healthOfSource, type StoreHealth } from "./breaker.js";
import type { ClientInput } from "./client.js";
import { LOCK_TTL_MS } from "./defaults.js";
import { LockLeaseLostError, LockNotAcquiredError, ValidationError } from "./errors.js";
import { subjectOf } from "./events.js";
import { type CloseOptions, Holdings } from "./holdings.js";
import { keepLease } from "./keeper.js";
import { type LeaseBackend, LeaseHandle, type LockLease } from "./lease.js";
import {
  type CallOptions,
  type CallSettings,
  type Defaults,
  factoryOptions,
  type KeepingOptions,
  type OwnerOptions,
  type RetryOptions,
  resolveCall,
  resolveDefaults,
  type WaitOptions,
} from "./options.js";
import { checkOwner, defaultOwner, type Holder, holderOf, ownerTag, TokenTag } from "./owner.js";
import type { AcquireReply, LockStats, QueueOptions, Store, WaiterRefresh } from "./store/types.js";
import { bounded, send } from "./store-call.js";
import { isInspection, isLockStats } from "./store-replies.js";
import { id as checkId, knownOptions, optionsObject } from "./validate.js";

/** Options of `acquire` on a lock. */
export interface LockAcquireOptions extends RetryOptions, WaitOptions, CallOptions, OwnerOptions {
  /**
   * How long the lock is held without an extend, in ms.
   * @default the lock's ttlMs (30000)
   */
  ttlMs?: number;
}

/** Options of `run` on a lock. */
export interface LockRunOptions extends LockAcquireOptions, KeepingOptions {}

/** Options of {@link lock}. Every `acquire`/`run` option may be given here as a default. */
export interface LockOptions extends RetryOptions, WaitOptions, KeepingOptions, OwnerOptions {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store. Omitted: the process-wide embedded memory store.
   */
  client?: ClientInput;
  /**
   * Key namespace; the store key of an id is `{<prefix>:<id>}`.
   * @default "lock"
   */
  prefix?: string;
  /**
   * Lock lifetime without renewal, in ms: the crash backstop, and with `run` the renewal window.
   * @default 30000
   */
  ttlMs?: number;
}

/** A distributed mutual-exclusion lock; see {@link lock}. */
export interface Lock {
  /**
   * Takes the lock on `id`, or resolves `null` when someone else holds it
   * (after any retries). Not renewed in the background: call `extend()` if
   * the work can outlive `ttlMs`, and always `release()`. Its `signal`
   * aborts when its end passes without an `extend()`.
   */
  acquire(id: string, options?: LockAcquireOptions): Promise<LockLease | null>;
  /**
   * Runs `fn` holding the lock on `id`, renewing it while `fn` runs and
   * releasing it after. Rejects with `LockNotAcquiredError` when held
   * elsewhere, and with `LockLeaseLostError` when the lock was lost while
   * `fn` ran, even if `fn` resolved.
   */
  run<T>(id: string, fn: (lease: LockLease) => T | PromiseLike<T>, options?: LockRunOptions): Promise<T>;
  /** Whether `id` is held, and for how long yet if not renewed: one store round trip. */
  stats(id: string): Promise<LockStats>;
  /**
   * Lets go of everything this lock holds, for a clean shutdown, as
   * `Semaphore.close` does: later calls and queued waiters are refused with
   * `ShutdownError`, held leases' signals abort with it, and what is still
   * held after `graceMs` is released. Resolves when every lock is back; a
   * second call returns the same promise.
   *
   * @example
   * ```ts
   * await locks.close({ graceMs: 2_000 });
   * ```
   */
  close(options?: CloseOptions): Promise<void>;
  /** Whether the store answers, as this process has seen it, without a round trip (see `Semaphore.health`). */
  health(): Promise<StoreHealth>;
  /**
   * Who holds the lock on `id` now: its token, owner, acquire time and end
   * (a waiter it was handed to included), or `null` when it is free. One
   * store round trip, no writes.
   *
   * @example
   * ```ts
   * const h = await locks.holder("order:42");
   * if (h) log.warn(`order:42 held by ${h.owner} since ${new Date(h.acquiredAt ?? 0).toISOString()}`);
   * ```
   */
  holder(id: string): Promise<Holder | null>;
}

const FACTORY_OPTIONS = [
  "client",
  "prefix",
  "ttlMs",
  "retries",
  "retryDelayMs",
  "waitMs",
  "maxQueue",
  "heartbeatMs",
  "onRenewError",
  "owner",
] as const;
const ACQUIRE_OPTIONS = ["ttlMs", "retries", "retryDelayMs", "waitMs", "maxQueue", "signal", "owner"] as const;
const RUN_OPTIONS = [...ACQUIRE_OPTIONS, "heartbeatMs", "onRenewError"] as const;

class DistributedLock implements Lock {
  readonly #defaults: Defaults;
  /** The default owner's token tag (see `ownerTag`). */
  readonly #tag: TokenTag;
  readonly #holdings = new Holdings("lock");

  constructor(options: Record<string, unknown>) {
    this.#defaults = resolveDefaults(options, "lock", "ttlMs", LOCK_TTL_MS, this.#holdings.signal);
    this.#tag = new TokenTag(ownerTag(options.owner === undefined ? defaultOwner() : checkOwner(options.owner)));
  }

  async acquire(id: string, options?: LockAcquireOptions): Promise<LockLease | null> {
    const settings = this.#prepare(id, options, false);
    const outcome = await this.#take(id, settings, this.#tagOf(options));
    return outcome instanceof LeaseHandle ? outcome : null;
  }

  async run<T>(id: string, fn: (lease: LeaseHandle) => T | PromiseLike<T>, options?: LockRunOptions): Promise<T> {
    if (typeof fn !== "function") {
      throw new ValidationError("fn", "run(id, fn) needs a function to run while the lock is held.");
    }
    const settings = this.#prepare(id, options, true);
    const outcome = await this.#take(id, settings, this.#tagOf(options));
    if (!(outcome instanceof LeaseHandle)) throw new LockNotAcquiredError(id, outcome.retryAfterMs, outcome.reason, outcome);
    return keepLease(outcome, fn, settings);
  }

  async stats(id: string): Promise<LockStats> {
    this.#holdings.refuse();
    const key = this.#defaults.keys.of(checkId(id));
    const store = await this.#defaults.source.get();
    breakerOf(store)?.admit("lock", key);
    return bounded(
      store,
      "stats",
      send(() => store.lock.stats({ key })),
      isLockStats,
      subjectOf("lock", id),
    );
  }

  health(): Promise<StoreHealth> {
    return healthOfSource(this.#defaults.source);
  }

  async holder(id: string): Promise<Holder | null> {
    this.#holdings.refuse();
    const key = this.#defaults.keys.of(checkId(id));
    const store = await this.#defaults.source.get();
    const seen = await bounded(store, "holder", store.lock.inspect({ key }), isInspection, subjectOf("lock", id));
    const held = seen.holders[0];
    return held === undefined ? null : holderOf(held, Date.now());
  }

  /** The token tag of a call (after `#prepare` checked its options). */
  #tagOf(options: LockRunOptions | undefined): TokenTag {
    return options?.owner === undefined ? this.#tag : new TokenTag(ownerTag(checkOwner(options.owner)));
  }

  #prepare(id: string, options: LockRunOptions | undefined, keeping: boolean): CallSettings {
    checkId(id);
    // No per-call options: the defaults, resolved once.
    if (options === undefined) {
      return keeping ? this.#defaults.plain.run : this.#defaults.plain.acquire;
    }
    const given = optionsObject(options, keeping ? "run" : "acquire");
    knownOptions(given, keeping ? RUN_OPTIONS : ACQUIRE_OPTIONS, `lock ${keeping ? "run" : "acquire"}`);
    return resolveCall(this.#defaults, given, keeping);
  }

  async #take(id: string, settings: CallSettings, tag: TokenTag): Promise<LeaseHandle | Refused> {
    const holdings = this.#holdings;
    holdings.refuse();
    const ops = new LockOps(id, this.#defaults.keys.of(id), settings.leaseMs, tag);
    const linked = holdings.follow(settings);
    // close() waits for the answer, and takes back a lock it brings after close() began.
    holdings.started();
    try {
      const outcome = await acquireLease(this.#defaults.source, linked?.settings ?? settings, ops);
      if (!outcome.acquired) return outcome;
      ops.store = outcome.store;
      return holdings.adopt(
        new LeaseHandle(id, outcome.token, outcome.fence, settings.leaseMs, outcome.sentAt, outcome.waitedMs, ops, outcome.until),
      );
    } finally {
      holdings.ended(linked);
    }
  }

  close(options?: CloseOptions): Promise<void> {
    return this.#holdings.close(options, this.#defaults.source);
  }
}

/** The store calls of one acquisition and then of its lease (see SemaphoreOps). */
class LockOps extends KeyCalls implements KeyOps, LeaseBackend {
  readonly weight = 1;
  readonly limit = 1;

  constructor(id: string, key: string, leaseMs: number, tag: TokenTag) {
    super("lock", id, key, leaseMs, tag);
  }

  take(store: Store, token: string, queue?: QueueOptions): Promise<AcquireReply> {
    return store.lock.acquire({ key: this.key, token, leaseMs: this.leaseMs, queue });
  }

  leave(store: Store, token: string): Promise<void> {
    return store.lock.leave({ key: this.key, token });
  }

  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Promise<WaiterRefresh> {
    return store.lock.refreshWaiters({ key: this.key, tokens, waiterLeaseMs });
  }

  extend(token: string, ms: number): Promise<boolean> {
    return this.store.lock.extend({ key: this.key, token, leaseMs: ms });
  }

  release(token: string, heldMs: number | undefined): Promise<boolean> {
    return this.store.lock.release({ key: this.key, token, heldMs });
  }

  lost(): LockLeaseLostError {
    return new LockLeaseLostError(this.id);
  }
}

/**
 * A distributed lock whose holder keeps a renewable lease: one caller per id
 * at a time, across every process that shares the store. Taken with
 * `SET key token NX PX ttl`; extend and release check the token, so an
 * expired holder never deletes its successor's lock.
 *
 * Two call forms: `lock(client, options)` and `lock({ client, ...options })`.
 * Without a client it runs on the embedded memory store (one process).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { lock } from "leasehold";
 *
 * const locks = lock(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { ttlMs: 10_000 });
 * await locks.run("order:42", (lease) => charge(order, { signal: lease.signal }));
 * ```
 */
export function lock(options?: LockOptions): Lock;
export function lock(client: ClientInput, options?: Omit<LockOptions, "client">): Lock;
export function lock(...args: unknown[]): Lock {
  return new DistributedLock(factoryOptions(args, "lock", FACTORY_OPTIONS));
}

/**
 * A lock as the HTTP admission runs it: the same `run`, whose body is typed
 * with the engine's lease handle (to follow and report a loss) rather than
 * the public `LockLease`. Internal: not exported by the package.
 */
export interface LockEngine {
  run<T>(id: string, fn: (lease: LeaseHandle) => T | PromiseLike<T>, options?: LockRunOptions): Promise<T>;
  close(options?: CloseOptions): Promise<void>;
}

/** Creates a {@link LockEngine}; options are checked as `lock(options)` checks them. Internal. */
export function lockEngine(options: LockOptions): LockEngine {
  return new DistributedLock(factoryOptions([options], "lock", FACTORY_OPTIONS));
}
