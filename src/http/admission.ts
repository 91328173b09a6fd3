import { RETRY_AFTER_DEFAULT_MS } from "../defaults.js";
import {
  type LeaseLostError,
  LockNotAcquiredError,
  SemaphoreNotAcquiredError,
  ShutdownError,
  StoreUnavailableError,
  ValidationError,
} from "../errors.js";
import { channels, type HttpRejectedEvent } from "../events.js";
import type { CloseOptions } from "../holdings.js";
import type { SemaphoreLease } from "../lease.js";
import type { LeaseHandle } from "../lease-handle.js";
import { type LockEngine, lockEngine } from "../lock.js";
import { type SemaphoreEngine, type SemaphoreRunOptions, semaphoreEngine } from "../semaphore.js";
import type { AdmissionConfig } from "./config.js";
import type { Exchange, LeaseView } from "./exchange.js";
import { type RequestTenant, requestId, requestTenant } from "./identify.js";
import {
  type Rejection,
  type RejectionContext,
  refusalDetail,
  rejection,
  shuttingDownRejection,
  storeDownDetail,
  tenantFullDetail,
  tenantMissingRejection,
} from "./problem.js";
import { RetryAfterEstimate } from "./retry-after.js";

/**
 * What admitting one request came to: its lease (admitted), a rejection to
 * answer, `"passed"` (skipped, or let through without a lease by
 * `onStoreError: "fail-open"`), or `"abandoned"` (the client left first).
 */
export type Admitted = LeaseView | Rejection | "passed" | "abandoned";

type Engine = { kind: "semaphore"; engine: SemaphoreEngine } | { kind: "lock"; engine: LockEngine };

/**
 * The framework-independent half of every adapter: maps a request to a lease
 * id, admits it through the engine's `run` (so lease keeping is the engine's,
 * not copied), and holds the lease until the request's {@link Exchange} ends.
 * Options are parsed before (`parseAdmissionOptions`); the engine primitive
 * is made, and checks its own options, here, at creation.
 */
export class Admission<Req, OnRejected = never> {
  readonly config: AdmissionConfig<Req, OnRejected>;
  readonly #engine: Engine;
  readonly #estimate = new RetryAfterEstimate();

  constructor(config: AdmissionConfig<Req, OnRejected>) {
    this.config = config;
    const { engine } = config;
    this.#engine =
      engine.kind === "semaphore"
        ? { kind: "semaphore", engine: semaphoreEngine(engine.options) }
        : { kind: "lock", engine: lockEngine(engine.options) };
  }

  /**
   * Admits `request`: resolves once the request may proceed (with its lease),
   * must be refused, or passes without a lease. The lease is held until
   * `exchange.ended` resolves and is released exactly once. Errors from
   * `key`, `skip` or a limit function reject (the framework's error path).
   */
  admit(request: Req, exchange: Exchange): Promise<Admitted> {
    const { skip } = this.config;
    try {
      // Without `skip`, no async wrapper: one promise less on every request.
      return skip === undefined ? this.#take(request, exchange) : this.#admitUnlessSkipped(skip, request, exchange);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async #admitUnlessSkipped(
    skip: (request: Req) => boolean | PromiseLike<boolean>,
    request: Req,
    exchange: Exchange,
  ): Promise<Admitted> {
    return (await skip(request)) ? "passed" : this.#take(request, exchange);
  }

  /** Takes the lease: throws (synchronously) what `key` or a limit function throws. */
  #take(request: Req, exchange: Exchange): Promise<Admitted> {
    const { config } = this;
    const id = requestId(config, request);
    const limit = typeof config.limit === "function" ? config.limit(request) : config.limit;
    const weight = typeof config.weight === "function" ? config.weight(request) : config.weight;
    const tenant = requestTenant(config, request, limit);
    exchange.id = id;
    exchange.limit = limit;
    if (exchange.gone) return Promise.resolve("abandoned");
    if (tenant === null) {
      const error = new ValidationError("tenant", `the tenant function of "${config.name}" found no tenant for this request.`);
      return Promise.resolve(this.#announce(tenantMissingRejection(error, id, limit), undefined));
    }

    return new Promise<Admitted>((resolve, reject) => {
      let admittedAt: number | undefined;
      const hold = (lease: LeaseHandle & Partial<SemaphoreLease>): Promise<void> | undefined => {
        admittedAt = performance.now();
        if (lease.waitedMs > 0 && config.queues) this.#estimate.waited(lease.waitedMs);
        if (exchange.gone) {
          resolve("abandoned");
          return undefined;
        }
        const hook = config.onLeaseLost;
        resolve(exchange.bind(lease, hook === undefined ? undefined : (error: LeaseLostError) => hook(error, request)));
        return exchange.ended;
      };
      const held = (): void => {
        if (admittedAt !== undefined) this.#estimate.held(performance.now() - admittedAt);
      };
      const failed = (error: unknown): void => {
        // After admission the only failure is a lost lease, already reported through the exchange.
        if (admittedAt !== undefined) return;
        if (exchange.gone) resolve("abandoned");
        else if (error instanceof SemaphoreNotAcquiredError || error instanceof LockNotAcquiredError) {
          resolve(this.#refused(error, id, limit, weight, tenant));
        } else if (error instanceof ShutdownError) {
          resolve(this.#announce(shuttingDownRejection(error, id, limit), tenant?.name));
        } else if (error instanceof StoreUnavailableError) {
          config.onStoreUnavailable?.(error, request);
          resolve(config.failOpen ? "passed" : this.#storeDown(error, id, limit, tenant));
        } else reject(error);
      };
      // The engine made for adapters (semaphoreEngine, lockEngine) builds its refusals without a stack.
      const running: Promise<unknown> =
        this.#engine.kind === "semaphore"
          ? this.#engine.engine.run(id, hold, this.#runOptions(limit, weight, tenant, exchange))
          : this.#engine.engine.run(id, hold, config.mayWait ? { signal: exchange.clientSignal } : undefined);
      running.then(held, failed);
    });
  }

  /**
   * Per-call options only where a request differs from the primitive's
   * defaults (a limit or weight function, a tenant), plus the client's signal
   * for a request that may wait. Most routes pass none: the engine's fastest path.
   */
  #runOptions(
    limit: number,
    weight: number,
    tenant: RequestTenant | undefined,
    exchange: Exchange,
  ): SemaphoreRunOptions | undefined {
    const { config } = this;
    const perRequest = typeof config.limit === "function" || weight !== 1;
    if (!perRequest && !config.mayWait && tenant === undefined) return undefined;
    const options: SemaphoreRunOptions = perRequest ? { limit, weight } : {};
    if (tenant !== undefined) {
      options.tenant = tenant.name;
      options.tenantLimit = tenant.limit;
      if (config.tenantMaxQueue !== undefined) options.tenantMaxQueue = config.tenantMaxQueue;
    }
    if (config.mayWait) options.signal = exchange.clientSignal;
    return options;
  }

  /**
   * Closes the route's semaphore or lock (see `Semaphore.close`): requests
   * arriving from now on, and those waiting in its queue, are answered 503
   * `shutting-down`; the signal of every request in flight aborts with a
   * `ShutdownError`, and its permit is released when its work ends, or when
   * `graceMs` ends (then it is answered, or cut, as a lost lease).
   */
  close(options?: CloseOptions): Promise<void> {
    return this.#engine.engine.close(options);
  }

  /**
   * A full semaphore, a tenant at its cap, or a held lock: the route's status
   * (429 for a tenant by default), and Retry-After as estimated or as
   * configured. A tenant's refusal carries its own figures only.
   */
  #refused(
    error: SemaphoreNotAcquiredError | LockNotAcquiredError,
    id: string,
    limit: number,
    weight: number,
    tenant: RequestTenant | undefined,
  ): Rejection {
    const { kind } = this.config;
    const estimate = this.#estimate.seconds(error);
    if (error.reason === "tenant-full" && tenant !== undefined) {
      const context = { reason: "tenant-full", status: this.config.tenantStatus, key: id, limit: tenant.limit } as const;
      const retryAfter = this.#retryAfter({ ...context, tenant: tenant.name, retryAfter: estimate, error });
      const detail = tenantFullDetail(id, tenant.name, tenant.limit, weight, retryAfter);
      const refused = rejection({ ...context, type: "tenant-full", tenant: tenant.name, retryAfter, detail, error });
      return this.#announce(refused, tenant.name);
    }
    const { status } = this.config;
    // The engine's reason (full, queue-full, wait-timeout); the problem type says which primitive refused.
    const { reason } = error;
    const type = kind === "semaphore" ? "semaphore-full" : "lock-held";
    const retryAfter = this.#retryAfter({ reason, status, key: id, limit, tenant: tenant?.name, retryAfter: estimate, error });
    const detail = refusalDetail(kind, id, limit, error.reason, retryAfter);
    const refused = rejection({ type, reason, status, key: id, limit, tenant: tenant?.name, retryAfter, detail, error });
    return this.#announce(refused, tenant?.name);
  }

  /** The configured Retry-After, or leasehold's estimate; whole seconds. */
  #retryAfter(refusal: RejectionContext): number {
    const configured = this.config.retryAfter;
    if (configured === undefined) return refusal.retryAfter;
    const seconds = typeof configured === "number" ? configured : configured(refusal);
    return Number.isFinite(seconds) ? Math.max(0, Math.ceil(seconds)) : refusal.retryAfter;
  }

  #storeDown(error: StoreUnavailableError, id: string, limit: number, tenant: RequestTenant | undefined): Rejection {
    const store = error.store ?? "lease";
    return this.#announce(
      rejection({
        type: "store-unavailable",
        reason: "store-unavailable",
        status: 503,
        key: id,
        limit,
        tenant: tenant?.name,
        // While the breaker holds the store down, the time to its next probe; else a second.
        retryAfter: Math.max(1, Math.ceil((error.retryAfterMs ?? RETRY_AFTER_DEFAULT_MS) / 1000)),
        detail: storeDownDetail(store, id),
        error,
        store,
      }),
      tenant?.name,
    );
  }

  /**
   * Publishes an adapter refusal on its diagnostics channel: `name` is the
   * route's; the request's tenant, if any, travels apart (as on the engine's
   * events), for exporters to add only when asked (`tenantAttribute`).
   */
  #announce(refused: Rejection, tenant: string | undefined): Rejection {
    if (channels.httpRejected.hasSubscribers) {
      const event: HttpRejectedEvent = {
        kind: this.config.kind,
        name: this.config.name,
        id: refused.problem.key,
        status: refused.status,
        reason: refused.reason,
      };
      if (tenant !== undefined) event.tenant = tenant;
      channels.httpRejected.publish(event);
    }
    return refused;
  }
}
