import type { ClientInput } from "../client.js";
import {
  type LeaseLostError,
  LockNotAcquiredError,
  type NotAcquiredReason,
  SemaphoreNotAcquiredError,
  StoreUnavailableError,
  ValidationError,
} from "../errors.js";
import { channels, type HttpRejectedEvent } from "../events.js";
import type { LeaseHandle, SemaphoreLease } from "../lease.js";
import { type Lock, lock } from "../lock.js";
import { type Semaphore, type SemaphoreRunOptions, semaphore } from "../semaphore.js";
import { id as checkId, integerAtLeast, knownOptions, optionalFunction, optionsObject, positiveMs } from "../validate.js";
import type { Exchange, RequestLease } from "./exchange.js";
import { type Rejection, rejection } from "./problem.js";

export type { RequestLease } from "./exchange.js";

/** Options every adapter takes, for semaphores and locks alike. `Req` is the framework's request (or context). */
export interface AdmissionOptions<Req> {
  /**
   * Where leases live: an ioredis `Redis` or `Cluster`, a promise of one, a
   * factory, or a store.
   * @default the process-wide embedded memory store (NestJS: the module's client)
   */
  client?: ClientInput;
  /** Key namespace of the engine primitive. @default "semaphore" / "lock" */
  prefix?: string;
  /**
   * Derives the per-request part of the lease id: the id becomes
   * `<name>:<key(request)>`. Must return a non-empty string; anything else is
   * a `ValidationError` on the framework's error path, never a shared key.
   */
  key?: (request: Req) => string;
  /** Requests for which this returns true pass through without a lease. */
  skip?: (request: Req) => boolean | PromiseLike<boolean>;
  /**
   * Status of a refusal (full semaphore / held lock).
   * @default 503 for a semaphore, 409 for a lock
   */
  status?: number;
  /**
   * Retry-After in seconds: a number, or a function of the refusal.
   * @default an estimate from the hold times this process observed, capped by the nearest lease expiry
   */
  retryAfter?: number | ((rejection: Rejection) => number);
  /**
   * What to do when the store cannot be reached: `"fail-closed"` refuses
   * with 503; `"fail-open"` lets the request through without a lease.
   * @default "fail-closed"
   */
  onStoreError?: "fail-closed" | "fail-open";
  /** Sees every store failure met while admitting, in both modes. */
  onStoreUnavailable?: (error: StoreUnavailableError, request: Req) => void;
  /**
   * Sees a lease lost while its request was in flight, including a permit
   * taken back `disconnectGraceMs` after a disconnect from a handler still at work.
   */
  onLeaseLost?: (error: LeaseLostError, request: Req) => void;
  /**
   * After the client disconnects, how long the handler may work on before
   * its permit is taken back anyway (reported as a loss: the `lost` event and
   * `onLeaseLost`). The permit returns sooner when the work ends: the handler
   * settles (Hono, NestJS) or ends the response (Express), or releases the lease.
   * @default 5000
   */
  disconnectGraceMs?: number;
  /**
   * Wait up to this long in the id's fair FIFO queue instead of being refused
   * at once. A client that disconnects while waiting leaves the queue.
   * @default 0 (fail fast)
   */
  waitMs?: number;
  /** The most requests waiting on one id; one more is refused at once. @default unbounded */
  maxQueue?: number;
  /** Further attempts when full (a bounded spin; prefer `waitMs`). @default 0 */
  retries?: number;
  /** Pause between attempts, in ms. @default 100 */
  retryDelayMs?: number;
  /** Renewal interval while the response is in flight. @default a quarter of the lease */
  heartbeatMs?: number | false;
  /** Sees each failed renewal round trip (not a loss). */
  onRenewError?: (error: unknown) => void;
}

/** Adapter options of a semaphore. */
export interface SemaphoreAdmissionOptions<Req> extends AdmissionOptions<Req> {
  /** How long a permit lasts without renewal, in ms. @default 60000 */
  leaseMs?: number;
  /** Permits one request takes: a number or a function of the request. @default 1 */
  weight?: number | ((request: Req) => number);
}

/** Adapter options of a lock. */
export interface LockAdmissionOptions<Req> extends AdmissionOptions<Req> {
  /** How long the lock lasts without renewal, in ms. @default 30000 */
  ttlMs?: number;
}

/** What admitting one request came to. */
export type Admitted<Req> =
  | { type: "admitted"; lease: RequestLease }
  | { type: "rejected"; rejection: Rejection }
  | { type: "passed"; reason: "skipped" | "store-unavailable"; request: Req }
  | { type: "abandoned" };

/** How long a handler may work on after its client left, by default. */
const DEFAULT_DISCONNECT_GRACE_MS = 5_000;

const ADAPTER_OPTIONS = [
  "client",
  "prefix",
  "key",
  "skip",
  "status",
  "retryAfter",
  "onStoreError",
  "onStoreUnavailable",
  "onLeaseLost",
  "retries",
  "retryDelayMs",
  "heartbeatMs",
  "onRenewError",
  "waitMs",
  "maxQueue",
  "disconnectGraceMs",
] as const;

/** An exponentially weighted average: recent requests count most. */
class Average {
  value: number | undefined;

  record(ms: number): void {
    this.value = this.value === undefined ? ms : this.value * 0.8 + ms * 0.2;
  }
}

/**
 * What this process has observed of a route's hold and wait times, to answer
 * Retry-After with what permits actually take rather than a constant.
 */
class Observed {
  readonly holds = new Average();
  readonly waits = new Average();

  /**
   * Seconds until a retry is likely to succeed. Refused outright: the typical
   * hold, capped by the nearest lease expiry (the latest a permit can stay
   * taken). Refused after queueing or with the queue full: the typical wait of
   * those admitted from the queue, when there is one.
   */
  retryAfter(reason: NotAcquiredReason, nearestExpiryMs: number): number {
    const hold = this.holds.value === undefined ? nearestExpiryMs : Math.min(this.holds.value, nearestExpiryMs);
    const ms = reason !== "full" && this.waits.value !== undefined ? Math.max(this.waits.value, 1) : hold;
    return Math.max(1, Math.ceil(ms / 1000));
  }
}

function checkName(name: unknown): string {
  if (typeof name === "string" && name.length > 0) {
    try {
      return checkId(name);
    } catch (error) {
      throw new ValidationError("name", `the lease name is not usable: ${(error as Error).message.replace(/^leasehold: /, "")}`);
    }
  }
  throw new ValidationError(
    "name",
    `the lease name must be a non-empty string naming what is limited (e.g. "openai"), got ${typeof name === "string" ? '""' : String(name)}.`,
  );
}

function checkStatus(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "number" && Number.isInteger(value) && value >= 400 && value <= 599) return value;
  throw new ValidationError(
    "status",
    `\`status\` must be an HTTP error status from 400 to 599 (e.g. 429 for a per-tenant quota), got ${String(value)}.`,
  );
}

function checkRetryAfter(value: unknown): number | ((rejection: Rejection) => number) | undefined {
  if (value === undefined || typeof value === "function") return value as ((rejection: Rejection) => number) | undefined;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0) return value;
  throw new ValidationError(
    "retryAfter",
    `\`retryAfter\` must be whole seconds (0 or more) or a function of the rejection, got ${String(value)}.`,
  );
}

/**
 * The framework-independent half of every adapter: validates the options
 * once, maps a request to a lease id, admits it through the engine's `run`
 * (so lease keeping is the engine's, not copied), and holds the lease until
 * the adapter says the response ended.
 */
export class Admission<Req> {
  readonly kind: "semaphore" | "lock";
  readonly name: string;
  /** How long a handler may work on after its client left before its permit is taken back (and reported lost). */
  readonly disconnectGraceMs: number;
  readonly #limit: number | ((request: Req) => number);
  readonly #weight: number | ((request: Req) => number);
  readonly #primitive: Semaphore | Lock;
  readonly #key: ((request: Req) => string) | undefined;
  readonly #skip: ((request: Req) => boolean | PromiseLike<boolean>) | undefined;
  readonly #status: number;
  readonly #retryAfter: number | ((rejection: Rejection) => number) | undefined;
  readonly #failOpen: boolean;
  readonly #onStoreUnavailable: AdmissionOptions<Req>["onStoreUnavailable"];
  readonly #onLeaseLost: AdmissionOptions<Req>["onLeaseLost"];
  readonly #observed = new Observed();
  #waiting = false;
  #mayWait = false;

  constructor(
    kind: "semaphore" | "lock",
    name: unknown,
    limit: unknown,
    given: unknown,
    where: string,
    extraKnown: readonly string[] = [],
  ) {
    this.kind = kind;
    this.name = checkName(name);
    const options = optionsObject(given, where);
    const lease = kind === "semaphore" ? (["leaseMs", "weight"] as const) : (["ttlMs"] as const);
    knownOptions(options, [...ADAPTER_OPTIONS, ...lease, ...extraKnown], where);
    if (kind === "semaphore") {
      if (typeof limit !== "function")
        integerAtLeast("limit", limit, 1, 'Pass how many requests may hold a permit at once, e.g. semaphore("openai", 20).');
      this.#limit = limit as number | ((request: Req) => number);
      const weight = options.weight;
      if (weight !== undefined && typeof weight !== "function")
        integerAtLeast("weight", weight, 1, "Pass how many permits one request takes.");
      this.#weight = (weight ?? 1) as number | ((request: Req) => number);
    } else {
      this.#limit = 1;
      this.#weight = 1;
    }
    this.#key = optionalFunction("key", options.key);
    this.#skip = optionalFunction("skip", options.skip);
    this.#status = checkStatus(options.status) ?? (kind === "semaphore" ? 503 : 409);
    this.#retryAfter = checkRetryAfter(options.retryAfter);
    if (options.onStoreError !== undefined && options.onStoreError !== "fail-closed" && options.onStoreError !== "fail-open") {
      throw new ValidationError(
        "onStoreError",
        `\`onStoreError\` must be "fail-closed" or "fail-open", got ${String(options.onStoreError)}.`,
      );
    }
    this.#failOpen = options.onStoreError === "fail-open";
    this.#onStoreUnavailable = optionalFunction("onStoreUnavailable", options.onStoreUnavailable);
    this.#onLeaseLost = optionalFunction("onLeaseLost", options.onLeaseLost);
    this.disconnectGraceMs =
      options.disconnectGraceMs === undefined
        ? DEFAULT_DISCONNECT_GRACE_MS
        : positiveMs(
            "disconnectGraceMs",
            options.disconnectGraceMs,
            "Pass how long a handler may keep its permit after its client disconnected, e.g. disconnectGraceMs: 5000.",
          );
    const engine: Record<string, unknown> = {
      client: options.client,
      prefix: options.prefix,
      retries: options.retries,
      retryDelayMs: options.retryDelayMs,
      waitMs: options.waitMs,
      maxQueue: options.maxQueue,
      heartbeatMs: options.heartbeatMs,
      onRenewError: options.onRenewError,
    };
    this.#waiting = typeof options.waitMs === "number" && options.waitMs > 0;
    this.#mayWait = this.#waiting || (typeof options.retries === "number" && options.retries > 0);
    // The engine validates its own options now, at creation, not on the first request.
    this.#primitive =
      kind === "semaphore"
        ? semaphore({ ...engine, limit: typeof limit === "number" ? limit : 1, leaseMs: options.leaseMs } as never)
        : lock({ ...engine, ttlMs: options.ttlMs } as never);
  }

  /** The lease id of a request: the name, or `<name>:<key(request)>`. A throwing key function propagates. */
  idFor(request: Req): string {
    if (this.#key === undefined) return this.name;
    const part = this.#key(request);
    if (typeof part !== "string" || part.length === 0) {
      throw new ValidationError(
        "key",
        `the key function of "${this.name}" returned ${typeof part === "string" ? "an empty string" : String(part)}; it must return a non-empty string (a tenant id, an order id). Reject requests that lack one before this middleware, or skip them with skip().`,
      );
    }
    const id = `${this.name}:${part}`;
    try {
      return checkId(id);
    } catch (error) {
      throw new ValidationError(
        "key",
        `the key function of "${this.name}" returned an unusable value: ${(error as Error).message.replace(/^leasehold: /, "")}`,
      );
    }
  }

  /**
   * Admits `request`: resolves once the request may proceed (with its lease),
   * must be refused, or passes without a lease. The lease is held until
   * `exchange.ended` resolves (see {@link Exchange}) and is released exactly once. Errors from
   * `key`, `skip` or a limit function reject (the framework's error path).
   */
  async admit(request: Req, exchange: Exchange): Promise<Admitted<Req>> {
    if (this.#skip !== undefined && (await this.#skip(request))) return { type: "passed", reason: "skipped", request };
    const id = this.idFor(request);
    const limit = typeof this.#limit === "function" ? this.#limit(request) : this.#limit;
    const weight = typeof this.#weight === "function" ? this.#weight(request) : this.#weight;
    if (exchange.gone) return { type: "abandoned" };

    return new Promise<Admitted<Req>>((resolve, reject) => {
      let admittedAt: number | undefined;
      const hold = (lease: LeaseHandle & Partial<SemaphoreLease>): Promise<void> | undefined => {
        admittedAt = performance.now();
        if (lease.waitedMs > 0 && this.#waiting) this.#observed.waits.record(lease.waitedMs);
        if (exchange.gone) {
          resolve({ type: "abandoned" });
          return undefined;
        }
        const view = exchange.bind(lease, (error) => {
          this.#onLeaseLost?.(error, request);
          exchange.onLost(error);
        });
        resolve({ type: "admitted", lease: view });
        return exchange.ended;
      };
      const running =
        this.kind === "semaphore"
          ? (this.#primitive as Semaphore).run(id, hold as never, this.#runOptions(limit, weight, exchange))
          : (this.#primitive as Lock).run(id, hold as never, this.#mayWait ? { signal: exchange.clientSignal } : undefined);
      running.then(
        () => {
          if (admittedAt !== undefined) this.#observed.holds.record(performance.now() - admittedAt);
        },
        (error: unknown) => {
          // After admission the only failure is a lost lease, already reported through the signal.
          if (admittedAt !== undefined) return;
          if (exchange.gone) {
            resolve({ type: "abandoned" });
          } else if (error instanceof SemaphoreNotAcquiredError || error instanceof LockNotAcquiredError) {
            resolve({ type: "rejected", rejection: this.#announce(this.#refusal(error, id, limit), id) });
          } else if (error instanceof StoreUnavailableError) {
            this.#onStoreUnavailable?.(error, request);
            resolve(
              this.#failOpen
                ? { type: "passed", reason: "store-unavailable", request }
                : { type: "rejected", rejection: this.#announce(this.#storeDown(error, id, limit), id) },
            );
          } else {
            reject(error);
          }
        },
      );
    });
  }

  /**
   * Per-call options only where a request differs from the primitive's
   * defaults (a limit or weight function), plus the client's signal for a
   * request that may wait. Most routes pass none: the engine's fastest path.
   */
  #runOptions(limit: number, weight: number, exchange: Exchange): SemaphoreRunOptions | undefined {
    const perRequest = typeof this.#limit === "function" || weight !== 1;
    if (!perRequest && !this.#mayWait) return undefined;
    return {
      ...(perRequest ? { limit, weight } : {}),
      ...(this.#mayWait ? { signal: exchange.clientSignal } : {}),
    };
  }

  /** The answer to a request whose lease was lost before its response started. */
  leaseLost(error: LeaseLostError, id: string, limit: number): Rejection {
    return rejection(
      "lease-lost",
      503,
      id,
      limit,
      1,
      `The permit on "${id}" was lost before the response started, so the request was stopped rather than run over the limit.`,
      error,
    );
  }

  /** Publishes an adapter refusal on its diagnostics channel. Names the route, never the tenant. */
  #announce(refused: Rejection, id: string): Rejection {
    if (channels.httpRejected.hasSubscribers) {
      channels.httpRejected.publish({
        kind: this.kind,
        name: this.name,
        id,
        status: refused.status,
        reason: refused.reason,
      } satisfies HttpRejectedEvent);
    }
    return refused;
  }

  #refusal(error: SemaphoreNotAcquiredError | LockNotAcquiredError, id: string, limit: number): Rejection {
    const estimate = this.#observed.retryAfter(error.reason, error.retryAfterMs);
    const why =
      error.reason === "queue-full"
        ? " and its queue is full"
        : error.reason === "wait-timeout"
          ? " and none freed within the wait"
          : "";
    const detail =
      this.kind === "semaphore"
        ? `All ${limit} permits of "${id}" are in use${why}; retry after ${estimate} s.`
        : `"${id}" is locked by another request${why}; retry after ${estimate} s.`;
    const refused = rejection(
      this.kind === "semaphore" ? "semaphore-full" : "lock-held",
      this.#status,
      id,
      limit,
      estimate,
      detail,
      error,
    );
    if (this.#retryAfter === undefined) return refused;
    const seconds = typeof this.#retryAfter === "number" ? this.#retryAfter : this.#retryAfter(refused);
    const whole = Number.isFinite(seconds) ? Math.max(0, Math.ceil(seconds)) : estimate;
    return rejection(
      refused.reason,
      refused.status,
      id,
      limit,
      whole,
      detail.replace(/retry after \d+ s/, `retry after ${whole} s`),
      error,
    );
  }

  #storeDown(error: StoreUnavailableError, id: string, limit: number): Rejection {
    const store = error.store ?? "lease";
    return rejection(
      "store-unavailable",
      503,
      id,
      limit,
      1,
      `The ${store} store behind "${id}" could not be reached, so the request was refused rather than admitted without a limit.`,
      error,
      store,
    );
  }
}
