import {
  type LeaseLostError,
  LockNotAcquiredError,
  SemaphoreNotAcquiredError,
  ShutdownError,
  StoreUnavailableError,
  ValidationError,
} from "../../src/errors/index.js";
import type { LeaseHandle } from "../../src/lease/handle.js";
import type { SemaphoreLease } from "../../src/lease/types.js";
import { type LockEngine, lockEngine } from "../../src/lock/index.js";
import { channels } from "../../src/observability/events.js";
import type { HttpRejectedEvent } from "../../src/observability/types.js";
import { RETRY_AFTER_DEFAULT_MS } from "../../src/options/defaults.js";
import type { CloseOptions } from "../../src/options/types.js";
import { type SemaphoreEngine, semaphoreEngine } from "../../src/semaphore/index.js";
import type { SemaphoreRunOptions } from "../../src/semaphore/types.js";
import type { AdmissionConfig } from "./config.js";
import { type Admitted, Exchange } from "./exchange.js";
import { type RequestTenant, requestId, requestTenant } from "./identify.js";
import {
  refusalDetail,
  rejection,
  shuttingDownRejection,
  storeDownDetail,
  tenantFullDetail,
  tenantMissingRejection,
} from "./problem.js";
import { RetryAfterEstimate } from "./retry-after.js";
import type { Rejection, RejectionContext } from "./types.js";

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
   * Admits `request` and tells `exchange.admitted` its outcome: its lease (held
   * until `exchange.ended` resolves, released exactly once), a refusal, or a
   * pass. Told within this call when the store answers at once (the embedded
   * one), so an adapter can go on without a promise or a tick. What `key`,
   * `skip` or a limit function throws goes to `exchange.admitFailed` (the
   * framework's error path).
   */
  admitTo(request: Req, exchange: Exchange): void {
    this.#tell(request, exchange, this.config.skip);
  }

  #tell(request: Req, exchange: Exchange, skip: AdmissionConfig<Req, OnRejected>["skip"]): void {
    let outcome: Admitted | undefined;
    try {
      outcome = skip === undefined ? this.#take(request, exchange) : this.#takeUnlessSkipped(skip, request, exchange);
    } catch (error) {
      exchange.admitFailed(error);
      return;
    }
    if (outcome !== undefined) exchange.admitted(outcome);
  }

  /** {@link admitTo} as a promise, for an adapter that awaits it (NestJS's guard). */
  admit(request: Req, exchange: Exchange): Promise<Admitted> {
    return new Promise<Admitted>((resolve, reject) => {
      exchange.admitted = resolve;
      exchange.admitFailed = reject;
      this.admitTo(request, exchange);
    });
  }

  /** A `skip` answering at once keeps the admission in the call; a promise of one tells the exchange later. */
  #takeUnlessSkipped(
    skip: (request: Req) => boolean | PromiseLike<boolean>,
    request: Req,
    exchange: Exchange,
  ): Admitted | undefined {
    const skipped = skip(request);
    if (typeof skipped === "boolean") return skipped ? "passed" : this.#take(request, exchange);
    Promise.resolve(skipped).then(
      (yes) => {
        if (yes) exchange.admitted("passed");
        else this.#tell(request, exchange, undefined);
      },
      (error: unknown) => exchange.admitFailed(error),
    );
    return undefined;
  }

  /**
   * Takes the lease: throws (synchronously) what `key` or a limit function throws. Returns the
   * outcome when it is known before the engine's `run` returns; else the exchange is told later.
   */
  #take(request: Req, exchange: Exchange): Admitted | undefined {
    const { config } = this;
    const id = requestId(config, request);
    const limit = typeof config.limit === "function" ? config.limit(request) : config.limit;
    const weight = typeof config.weight === "function" ? config.weight(request) : config.weight;
    const tenant = requestTenant(config, request, limit);
    exchange.id = id;
    exchange.limit = limit;
    if (exchange.gone) return "abandoned";
    if (tenant === null) {
      const error = new ValidationError("tenant", `the tenant function of "${config.name}" found no tenant for this request.`);
      return this.#announce(tenantMissingRejection(error, id, limit), undefined);
    }
    // The engine made for adapters (semaphoreEngine, lockEngine) builds its refusals without a stack.
    const hold = (lease: LeaseHandle & Partial<SemaphoreLease>): Promise<Exchange> | undefined =>
      this.#hold(lease, request, exchange);
    let running: Promise<unknown>;
    exchange.taking = true;
    try {
      running =
        this.#engine.kind === "semaphore"
          ? this.#engine.engine.run(id, hold, this.#runOptions(limit, weight, tenant, exchange))
          : this.#engine.engine.run(id, hold, config.mayWait ? { signal: exchange.clientSignal } : undefined);
    } finally {
      exchange.taking = false;
    }
    running.then(this.#held, (error: unknown) => this.#failed(error, request, exchange, weight, tenant));
    const taken = exchange.taken;
    exchange.taken = undefined;
    return taken;
  }

  /** The body of the engine's `run`: the permit is held until the exchange ends. */
  #hold(lease: LeaseHandle & Partial<SemaphoreLease>, request: Req, exchange: Exchange): Promise<Exchange> | undefined {
    const { config } = this;
    exchange.admittedAt = performance.now();
    if (lease.waitedMs > 0 && config.queues) this.#estimate.waited(lease.waitedMs);
    let outcome: Admitted = "abandoned";
    // A request ended while it waited (a timeout before the guard failed it, its client left) runs
    // nothing: its permit goes straight back.
    if (!exchange.over) {
      const hook = config.onLeaseLost;
      outcome = exchange.bind(lease, hook === undefined ? undefined : (error: LeaseLostError) => hook(error, request));
    }
    if (exchange.taking) exchange.taken = outcome;
    else exchange.admitted(outcome);
    return outcome === "abandoned" ? undefined : exchange.ended;
  }

  /** `run` settled after the exchange ended (with it): how long the permit was held feeds Retry-After. */
  readonly #held = (exchange: unknown): void => {
    if (exchange instanceof Exchange && exchange.admittedAt >= 0) {
      this.#estimate.held(performance.now() - exchange.admittedAt);
    }
  };

  /** `run` failed: before admission, a refusal or a store failure to answer; after, a lost lease, already reported. */
  #failed(error: unknown, request: Req, exchange: Exchange, weight: number, tenant: RequestTenant | undefined): void {
    if (exchange.admittedAt >= 0) return;
    const { config } = this;
    const { id, limit } = exchange;
    if (exchange.gone) exchange.admitted("abandoned");
    else if (error instanceof SemaphoreNotAcquiredError || error instanceof LockNotAcquiredError) {
      exchange.admitted(this.#refused(error, id, limit, weight, tenant));
    } else if (error instanceof ShutdownError) {
      exchange.admitted(this.#announce(shuttingDownRejection(error, id, limit), tenant?.name));
    } else if (error instanceof StoreUnavailableError) {
      config.onStoreUnavailable?.(error, request);
      exchange.admitted(config.failOpen ? "passed" : this.#storeDown(error, id, limit, tenant));
    } else exchange.admitFailed(error);
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
