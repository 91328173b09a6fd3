import { type Acquired, acquireLease, KeyCalls, type KeyOps, type Refused, type Tenant } from "./acquire.js";
import { breakerOf, healthOfSource, type StoreHealth } from "./breaker.js";
import type { ClientInput } from "./client.js";
import { SEMAPHORE_LEASE_MS } from "./defaults.js";
import { SemaphoreLeaseLostError, SemaphoreNotAcquiredError, ValidationError } from "./errors.js";
import { subjectOf } from "./events.js";
import { type CloseOptions, Holdings } from "./holdings.js";
import { keepLease } from "./keeper.js";
import { type LeaseBackend, LeaseHandle, type SemaphoreLease } from "./lease.js";
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
import { byAge, checkOwner, defaultOwner, type Holder, holderOf, limitTag, ownerTag, TokenTag } from "./owner.js";
import type { AcquireReply, QueueOptions, Store, WaiterRefresh } from "./store/types.js";
import { bounded, send } from "./store-call.js";
import { isCount, isCounts, isInspection } from "./store-replies.js";
import {
  type TenantCallOptions,
  type TenantDefaults,
  type TenantFactoryOptions,
  tenantDefaults,
  tenantOfCall,
} from "./tenants.js";
import { id as checkId, integerAtLeast, knownOptions, optionsObject } from "./validate.js";

/** Options of `acquire` on a semaphore. */
export interface SemaphoreAcquireOptions extends RetryOptions, WaitOptions, CallOptions, TenantCallOptions, OwnerOptions {
  /**
   * How long the permit is held without an extend, in ms.
   * @default the semaphore's leaseMs (60000)
   */
  leaseMs?: number;
  /**
   * How many permits to take at once, atomically. At most the limit.
   * @default 1
   */
  weight?: number;
  /**
   * The limit for this call, overriding the semaphore's. Lowering a limit
   * never revokes permits already held; it only stops new ones.
   */
  limit?: number;
}

/** Options of `run` on a semaphore. */
export interface SemaphoreRunOptions extends SemaphoreAcquireOptions, KeepingOptions {}

/** Options of {@link semaphore}. Every `acquire`/`run` option may be given here as a default. */
export interface SemaphoreOptions extends RetryOptions, WaitOptions, KeepingOptions, TenantFactoryOptions, OwnerOptions {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store. Omitted: the process-wide embedded memory store.
   */
  client?: ClientInput;
  /** How many permits exist per id: a positive integer, or a function of the id for per-id limits. */
  limit: number | ((id: string) => number);
  /**
   * Key namespace; the store key of an id is `{<prefix>:<id>}`.
   * @default "semaphore"
   */
  prefix?: string;
  /**
   * How long a permit is held without renewal, in ms. With `run` it is also the renewal window.
   * @default 60000
   */
  leaseMs?: number;
}

/** A distributed counting semaphore; see {@link semaphore}. */
export interface Semaphore {
  /**
   * Takes permits on `id`, or resolves `null` when they are all taken (after
   * any retries). The lease is not renewed in the background: call
   * `extend()` if the work can outlive it, and always `release()`. Its
   * `signal` aborts when its end passes without an `extend()`.
   */
  acquire(id: string, options?: SemaphoreAcquireOptions): Promise<SemaphoreLease | null>;
  /**
   * Runs `fn` holding permits on `id`, renewing the lease while it runs and
   * releasing it after. Rejects with `SemaphoreNotAcquiredError` when full,
   * and with `SemaphoreLeaseLostError` when the permit was lost while `fn`
   * ran, even if `fn` resolved.
   */
  run<T>(id: string, fn: (lease: SemaphoreLease) => T | PromiseLike<T>, options?: SemaphoreRunOptions): Promise<T>;
  /** Live holders of `id` (not permits: a weight-3 holder counts once). Lapsed leases are not counted. */
  count(id: string): Promise<number>;
  /**
   * Whether the store answers, as this process has seen it, without a round
   * trip: after a call fails to reach it, acquires and reads fail at once
   * with `StoreUnavailableError` until a probe answers.
   *
   * @example
   * ```ts
   * app.get("/healthz", async (_req, res) => {
   *   const health = await slots.health();
   *   res.status(health.state === "up" ? 200 : 503).json(health);
   * });
   * ```
   */
  health(): Promise<StoreHealth>;
  /**
   * Permit usage of `id` in one store round trip: the limit, permits used,
   * live holders, callers waiting, permits available, and how many tenants
   * hold or wait. With `{ tenant }`, the same for one tenant of the id, its
   * `limit` being its `tenantLimit` (the one passed here, or the semaphore's).
   */
  stats(id: string): Promise<SemaphoreStats>;
  stats(id: string, options: { tenant: string; tenantLimit?: number }): Promise<TenantStats>;
  /**
   * Who holds permits of `id` now, oldest first: each live lease's token,
   * owner, acquire time, end, weight and tenant (granted waiters included).
   * One store round trip, no writes; lapsed leases are left out.
   *
   * @example
   * ```ts
   * for (const h of await slots.holders("openai")) {
   *   log.info({ owner: h.owner, heldMs: Date.now() - (h.acquiredAt ?? Date.now()), weight: h.weight });
   * }
   * ```
   */
  holders(id: string): Promise<Holder[]>;
  /**
   * Lets go of everything this semaphore holds, for a clean shutdown. At once:
   * every later call is refused with `ShutdownError`, calls waiting in a queue
   * leave it (so no other process waits on them) and reject with it, and the
   * `signal` of every lease held aborts with it. Then, when the work has
   * stopped or `graceMs` has passed, every lease still held is released (one
   * whose work goes on is reported lost, with the `ShutdownError` as cause),
   * and the store is closed if leasehold made it from your client (with the
   * last semaphore or lock using it). A store or client you passed stays
   * open. Resolves when every permit is back; a second call returns the same
   * promise.
   *
   * @example
   * ```ts
   * process.once("SIGTERM", async () => {
   *   await slots.close({ graceMs: 10_000 });
   *   await redis.quit();
   * });
   * ```
   */
  close(options?: CloseOptions): Promise<void>;
}

/** What {@link Semaphore.stats} reports. */
export interface SemaphoreStats {
  /**
   * The limit you passed: the semaphore's, or its limit function's answer for
   * the id. Not read from the store, so processes that pass different limits
   * for one id each report their own.
   */
  limit: number;
  /** Permits held by live leases (weights included). */
  used: number;
  /** Live leases; agrees with `count(id)`. */
  holders: number;
  /** Callers waiting in the queue. */
  waiting: number;
  /** `limit - used`, at least 0 (a lowered limit can leave `used` above it). */
  available: number;
  /** Tenants holding or waiting (callers without a tenant are not counted). */
  tenants: number;
}

/** What {@link Semaphore.stats} reports for one tenant of an id. */
export interface TenantStats {
  tenant: string;
  /** The tenant's cap: its `tenantLimit`. */
  limit: number;
  /** Permits the tenant's live leases hold. */
  used: number;
  /** The tenant's callers waiting. */
  waiting: number;
  /** `limit - used`, at least 0 (the id's own limit may still be in the way). */
  available: number;
}

const FACTORY_OPTIONS = [
  "client",
  "limit",
  "prefix",
  "leaseMs",
  "retries",
  "retryDelayMs",
  "waitMs",
  "maxQueue",
  "heartbeatMs",
  "onRenewError",
  "tenantLimit",
  "tenantMaxQueue",
  "owner",
] as const;
const ACQUIRE_OPTIONS = [
  "leaseMs",
  "retries",
  "retryDelayMs",
  "waitMs",
  "maxQueue",
  "weight",
  "limit",
  "signal",
  "tenant",
  "tenantLimit",
  "tenantMaxQueue",
  "owner",
] as const;
const RUN_OPTIONS = [...ACQUIRE_OPTIONS, "heartbeatMs", "onRenewError"] as const;

const limitFix = "Pass how many holders are allowed at once, e.g. limit: 20.";

function checkLimit(value: unknown): number {
  return integerAtLeast("limit", value, 1, limitFix);
}

/** One validated call: everything needed to take the permits, computed before any slot is. */
interface PreparedCall {
  id: string;
  key: string;
  settings: CallSettings;
  limit: number;
  weight: number;
  tenant: Tenant | undefined;
  /** What the token carries after its random part (see `TokenTag`). */
  tag: TokenTag;
}

class SemaphoreLeaseHandle extends LeaseHandle implements SemaphoreLease {
  constructor(
    id: string,
    token: string,
    fence: number,
    leaseMs: number,
    sentAt: number,
    waitedMs: number,
    backend: LeaseBackend,
    readonly limit: number,
    readonly weight: number,
    readonly tenant: string | undefined,
    until?: number,
  ) {
    super(id, token, fence, leaseMs, sentAt, waitedMs, backend, until);
  }
}

const leaseOrNull = (outcome: SemaphoreLeaseHandle | Refused): SemaphoreLease | null =>
  outcome instanceof LeaseHandle ? outcome : null;

class DistributedSemaphore implements Semaphore {
  readonly #defaults: Defaults;
  readonly #limit: number | ((id: string) => number);
  readonly #tenants: TenantDefaults;
  /** The default owner's token tag (see `ownerTag`). */
  readonly #owner: string;
  /** The token tags of calls with the default owner, by limit (one, unless the limit is a function or a call passes its own). */
  readonly #tags = new Map<number, TokenTag>();
  readonly #holdings = new Holdings("semaphore");

  constructor(options: Record<string, unknown>) {
    if (options.limit === undefined) {
      throw new ValidationError("limit", `\`limit\` is required. ${limitFix}`);
    }
    this.#limit = typeof options.limit === "function" ? (options.limit as (id: string) => number) : checkLimit(options.limit);
    this.#defaults = resolveDefaults(options, "semaphore", "leaseMs", SEMAPHORE_LEASE_MS, this.#holdings.signal);
    this.#tenants = tenantDefaults(options, typeof this.#limit === "number" ? this.#limit : undefined);
    this.#owner = ownerTag(options.owner === undefined ? defaultOwner() : checkOwner(options.owner));
  }

  acquire(id: string, options?: SemaphoreAcquireOptions): Promise<SemaphoreLease | null> {
    try {
      const outcome = this.#take(this.#prepare(id, options, false));
      return outcome instanceof Promise ? outcome.then(leaseOrNull) : Promise.resolve(leaseOrNull(outcome));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async run<T>(id: string, fn: (lease: EngineLease) => T | PromiseLike<T>, options?: SemaphoreRunOptions): Promise<T> {
    if (typeof fn !== "function") {
      throw new ValidationError("fn", "run(id, fn) needs a function to run while the permit is held.");
    }
    const call = this.#prepare(id, options, true);
    const taken = this.#take(call);
    const outcome = taken instanceof Promise ? await taken : taken;
    if (!(outcome instanceof LeaseHandle)) {
      throw new SemaphoreNotAcquiredError(call.id, call.limit, outcome.retryAfterMs, outcome.reason, call.tenant, outcome);
    }
    return keepLease(outcome as SemaphoreLeaseHandle, fn, call.settings);
  }

  async count(id: string): Promise<number> {
    this.#holdings.refuse();
    const key = this.#defaults.keys.of(checkId(id));
    const store = await this.#defaults.source.get();
    breakerOf(store)?.admit("semaphore", key);
    return bounded(
      store,
      "count",
      send(() => store.semaphore.count({ key })),
      isCount,
      subjectOf("semaphore", id),
    );
  }

  health(): Promise<StoreHealth> {
    return healthOfSource(this.#defaults.source);
  }

  stats(id: string): Promise<SemaphoreStats>;
  stats(id: string, options: { tenant: string; tenantLimit?: number }): Promise<TenantStats>;
  async stats(id: string, options?: { tenant: string; tenantLimit?: number }): Promise<SemaphoreStats | TenantStats> {
    this.#holdings.refuse();
    const key = this.#defaults.keys.of(checkId(id));
    const limit = this.#limitFor(id);
    const given = options === undefined ? undefined : optionsObject(options, "stats");
    if (given !== undefined) knownOptions(given, ["tenant", "tenantLimit"], "semaphore stats");
    const tenant = given === undefined ? undefined : tenantOfCall(this.#tenants, given, limit, 1);
    const store = await this.#defaults.source.get();
    breakerOf(store)?.admit("semaphore", key);
    const subject = subjectOf("semaphore", id, tenant?.name);
    const figures = await bounded(
      store,
      "stats",
      send(() => store.semaphore.stats({ key, tenant: tenant?.name })),
      isCounts,
      subject,
    );
    if (tenant === undefined) {
      return {
        limit,
        used: figures.used,
        holders: figures.holders,
        waiting: figures.waiting,
        available: Math.max(0, limit - figures.used),
        tenants: figures.tenants ?? 0,
      };
    }
    const { used, waiting } = figures;
    return { tenant: tenant.name, limit: tenant.limit, used, waiting, available: Math.max(0, tenant.limit - used) };
  }

  async holders(id: string): Promise<Holder[]> {
    this.#holdings.refuse();
    const key = this.#defaults.keys.of(checkId(id));
    const store = await this.#defaults.source.get();
    const seen = await bounded(store, "holders", store.semaphore.inspect({ key }), isInspection, subjectOf("semaphore", id));
    const now = Date.now();
    return seen.holders.map((entry) => holderOf(entry, now)).sort(byAge);
  }

  /** Validates everything about a call before any slot is taken. */
  #prepare(id: string, options: SemaphoreRunOptions | undefined, keeping: boolean): PreparedCall {
    checkId(id);
    if (options === undefined) {
      // No per-call options: the defaults, resolved once.
      const settings = keeping ? this.#defaults.plain.run : this.#defaults.plain.acquire;
      const limit = this.#limitFor(id);
      return { id, key: this.#defaults.keys.of(id), settings, limit, weight: 1, tenant: undefined, tag: this.#tagFor(limit) };
    }
    const given = optionsObject(options, keeping ? "run" : "acquire");
    knownOptions(given, keeping ? RUN_OPTIONS : ACQUIRE_OPTIONS, `semaphore ${keeping ? "run" : "acquire"}`);
    const settings: CallSettings = resolveCall(this.#defaults, given, keeping);
    const limit = given.limit !== undefined ? checkLimit(given.limit) : this.#limitFor(id);
    const weight =
      given.weight === undefined ? 1 : integerAtLeast("weight", given.weight, 1, "Pass how many permits one call takes.");
    if (weight > limit) {
      throw new ValidationError(
        "weight",
        `\`weight\` ${weight} is above the limit ${limit} of "${id}": such a call could never be admitted. Lower the weight or raise the limit.`,
      );
    }
    const tenant = tenantOfCall(this.#tenants, given as TenantCallOptions, limit, weight);
    const tag =
      given.owner === undefined ? this.#tagFor(limit) : new TokenTag(limitTag(ownerTag(checkOwner(given.owner)), limit));
    return { id, key: this.#defaults.keys.of(id), settings, limit, weight, tenant, tag };
  }

  #tagFor(limit: number): TokenTag {
    let tag = this.#tags.get(limit);
    if (tag === undefined) {
      // Bounded: a limit function with many answers makes a few more tags, never a growing map.
      if (this.#tags.size >= 64) this.#tags.clear();
      tag = new TokenTag(limitTag(this.#owner, limit));
      this.#tags.set(limit, tag);
    }
    return tag;
  }

  #limitFor(id: string): number {
    if (typeof this.#limit === "number") return this.#limit;
    let value: unknown;
    try {
      value = this.#limit(id);
    } catch (error) {
      throw new ValidationError(
        "limit",
        `the limit function threw for "${id}": ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    return checkLimit(value);
  }

  /** The lease, or why not; in the same turn when the store can answer at once (the embedded one). */
  #take(call: PreparedCall): SemaphoreLeaseHandle | Refused | Promise<SemaphoreLeaseHandle | Refused> {
    const holdings = this.#holdings;
    holdings.refuse();
    const ops = new SemaphoreOps(call.id, call.key, call.limit, call.weight, call.settings.leaseMs, call.tag, call.tenant);
    const { settings } = call;
    const linked = holdings.follow(settings);
    let outcome: Acquired | Refused | Promise<Acquired | Refused>;
    try {
      outcome = acquireLease(this.#defaults.source, linked?.settings ?? settings, ops);
    } catch (error) {
      linked?.unlink();
      throw error;
    }
    if (!(outcome instanceof Promise)) {
      linked?.unlink();
      return this.#handle(call, ops, outcome);
    }
    // Answered later: close() waits for it, and takes back a lease it brings after close() began.
    holdings.started();
    return outcome.then(
      (had) => {
        try {
          return this.#handle(call, ops, had);
        } finally {
          holdings.ended(linked);
        }
      },
      (error: unknown) => {
        holdings.ended(linked);
        throw error;
      },
    );
  }

  close(options?: CloseOptions): Promise<void> {
    return this.#holdings.close(options, this.#defaults.source);
  }

  #handle(call: PreparedCall, ops: SemaphoreOps, outcome: Acquired | Refused): SemaphoreLeaseHandle | Refused {
    if (!outcome.acquired) return outcome;
    ops.store = outcome.store;
    return this.#holdings.adopt(
      new SemaphoreLeaseHandle(
        call.id,
        outcome.token,
        outcome.fence,
        call.settings.leaseMs,
        outcome.sentAt,
        outcome.waitedMs,
        ops,
        call.limit,
        call.weight,
        call.tenant?.name,
        outcome.until,
      ),
    );
  }
}

/**
 * The store calls of one acquisition, and then of its lease: one object with
 * methods rather than a closure per call, since a request makes one of these.
 */
class SemaphoreOps extends KeyCalls implements KeyOps, LeaseBackend {
  constructor(
    id: string,
    key: string,
    readonly limit: number,
    readonly weight: number,
    leaseMs: number,
    tag: TokenTag,
    tenant: Tenant | undefined,
  ) {
    super("semaphore", id, key, leaseMs, tag, tenant);
  }

  get permits(): { limit: number; weight: number } {
    return { limit: this.limit, weight: this.weight };
  }

  take(store: Store, token: string, queue?: QueueOptions): Promise<AcquireReply> {
    return store.semaphore.acquire({
      key: this.key,
      token,
      limit: this.limit,
      weight: this.weight,
      leaseMs: this.leaseMs,
      queue,
      tenant: this.tenant,
    });
  }

  leave(store: Store, token: string): Promise<void> {
    return store.semaphore.leave({ key: this.key, token });
  }

  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Promise<WaiterRefresh> {
    return store.semaphore.refreshWaiters({ key: this.key, tokens, waiterLeaseMs });
  }

  extend(token: string, ms: number): Promise<boolean> {
    return this.store.semaphore.extend({ key: this.key, token, leaseMs: ms, weight: this.weight });
  }

  release(token: string, heldMs: number | undefined): Promise<boolean> {
    return this.store.semaphore.release({ key: this.key, token, weight: this.weight, heldMs });
  }

  lost(): SemaphoreLeaseLostError {
    return new SemaphoreLeaseLostError(this.id, this.limit);
  }
}

/**
 * A counting semaphore whose holders keep renewable leases: at most `limit`
 * permits per id are held at once, across every process that shares the
 * store. Acquisition fails fast unless `waitMs` (a fair queue) or `retries`
 * (a bounded spin) are given.
 *
 * Two call forms: `semaphore(client, options)` and `semaphore({ client, ...options })`.
 * Without a client it runs on the embedded memory store (one process).
 *
 * @example
 * ```ts
 * import { Redis } from "ioredis";
 * import { semaphore } from "leasehold";
 *
 * const slots = semaphore(new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379"), { limit: 20, leaseMs: 60_000 });
 * const text = await slots.run("openai", (lease) => callModel({ signal: lease.signal }));
 * ```
 */
export function semaphore(options: SemaphoreOptions): Semaphore;
export function semaphore(client: ClientInput, options: Omit<SemaphoreOptions, "client">): Semaphore;
export function semaphore(...args: unknown[]): Semaphore {
  return new DistributedSemaphore(factoryOptions(args, "semaphore", FACTORY_OPTIONS));
}

/** The lease handle itself, as `run` hands it to its body: the public lease plus loss listeners and `lose()`. */
type EngineLease = LeaseHandle & SemaphoreLease;

/**
 * A semaphore as the HTTP admission runs it: the same `run`, whose body is
 * typed with the engine's lease handle (to follow and report a loss) rather
 * than the public `SemaphoreLease`. Internal: not exported by the package.
 */
export interface SemaphoreEngine {
  run<T>(id: string, fn: (lease: EngineLease) => T | PromiseLike<T>, options?: SemaphoreRunOptions): Promise<T>;
  close(options?: CloseOptions): Promise<void>;
}

/** Creates a {@link SemaphoreEngine}; options are checked as `semaphore(options)` checks them. Internal. */
export function semaphoreEngine(options: SemaphoreOptions): SemaphoreEngine {
  return new DistributedSemaphore(factoryOptions([options], "semaphore", FACTORY_OPTIONS));
}
