import type { NotAcquiredReason } from "../errors/index.js";
import type { Semaphore } from "../semaphore/types.js";

/**
 * What every event names. `name` is the id up to its first `:` (the adapters'
 * route name, e.g. `"openai"` for `"openai:tenant-42"`): use it, not `id`, as
 * a metric attribute, or tenant ids explode the series count.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.lost, (event) => {
 *   const { kind, name, id } = event as Subject;
 *   log.error({ kind, name, id }, "lease lost");
 * });
 * ```
 */
export interface Subject {
  kind: "semaphore" | "lock";
  name: string;
  id: string;
  /** The tenant a semaphore call passed, if any. */
  tenant?: string;
}

/**
 * What {@link CHANNELS}`.acquired` publishes: a lease was granted.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.acquired, (event) => waits.observe((event as AcquiredEvent).waitedMs));
 * ```
 */
export interface AcquiredEvent extends Subject {
  token: string;
  /** The lease's fence (see `Lease.fence`). */
  fence: number;
  waitedMs: number;
  /** Semaphores only. */
  limit?: number;
  weight?: number;
}

/**
 * What {@link CHANNELS}`.rejected` publishes: an acquire came back empty-handed.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.rejected, (event) => shed.inc({ reason: (event as RejectedEvent).reason }));
 * ```
 */
export interface RejectedEvent extends Subject {
  reason: NotAcquiredReason;
  waitedMs: number;
  limit?: number;
}

/**
 * What {@link CHANNELS}`.released` publishes: a lease was given back.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.released, (event) => holds.observe((event as ReleasedEvent).heldMs));
 * ```
 */
export interface ReleasedEvent extends Subject {
  token: string;
  heldMs: number;
  /** False when the lease had already lapsed or been taken. */
  ours: boolean;
  weight?: number;
}

/**
 * What {@link CHANNELS}`.lost` publishes: a lease was declared lost.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.lost, (event) => log.error({ id: (event as LostEvent).id }, "lease lost"));
 * ```
 */
export interface LostEvent extends Subject {
  token: string;
  error: Error;
}

/**
 * What {@link CHANNELS}`.renewError` publishes: a renewal (or final release) round trip failed; not a loss.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.renewError, (event) => log.warn({ error: (event as RenewErrorEvent).error }, "renewal failed"));
 * ```
 */
export interface RenewErrorEvent extends Subject {
  token: string;
  error: unknown;
}

/**
 * What {@link CHANNELS}`.storeError` publishes: the store failed a call.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.storeError, (event) => log.warn((event as StoreErrorEvent).error, "leasehold store error"));
 * ```
 */
export interface StoreErrorEvent {
  store: string;
  operation: string;
  error: Error;
  kind?: "semaphore" | "lock";
  name?: string;
  id?: string;
}

/**
 * What {@link CHANNELS}`.storeDown` publishes: a call could not reach the store; acquires fail at once until a probe answers.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.storeDown, (event) => alert(`store ${(event as StoreDownEvent).store} down`));
 * ```
 */
export interface StoreDownEvent {
  /** The store's kind (`"redis"`, or a custom store's). */
  store: string;
  /** The failure that took it down. */
  error: Error;
  /** Ms until the first probe. */
  retryAfterMs: number;
}

/**
 * What {@link CHANNELS}`.storeUp` publishes: the store answers again.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.storeUp, (event) => log.info(`store back after ${(event as StoreUpEvent).downMs} ms`));
 * ```
 */
export interface StoreUpEvent {
  store: string;
  /** How long it was down, in ms. */
  downMs: number;
}

/**
 * What {@link CHANNELS}`.httpRejected` publishes: an HTTP adapter refused a request.
 *
 * @example
 * ```ts
 * subscribe(CHANNELS.httpRejected, (event) => refusals.inc({ status: (event as HttpRejectedEvent).status }));
 * ```
 */
export interface HttpRejectedEvent extends Subject {
  status: number;
  reason: string;
}

/** The attributes of every leasehold metric: the name, never the tenant part of the id unless asked. */
export type MetricAttributes = {
  kind: string;
  name: string;
  id?: string;
  /** With `tenantAttribute`: the tenant a semaphore call (or an adapter's `tenant`) named. */
  tenant?: string;
};

/** What an exporter does with each event (OpenTelemetry and prom-client implement it). */
export interface MetricsSink {
  acquired(attributes: MetricAttributes, waitedMs: number): void;
  rejected(attributes: MetricAttributes & { reason: string }, waitedMs: number): void;
  released(attributes: MetricAttributes, heldMs: number): void;
  lost(attributes: MetricAttributes): void;
  renewError(attributes: MetricAttributes): void;
  storeError(attributes: { store: string; operation: string; kind?: string; name?: string }): void;
  /** A store went down (calls could not reach it; acquires now fail at once until a probe answers). */
  storeDown(attributes: { store: string }): void;
  httpRejected(attributes: MetricAttributes & { status: number; reason: string }): void;
}

/** Options shared by the OpenTelemetry and Prometheus exporters. */
export interface ExportOptions {
  /**
   * Add the full lease id (`openai:tenant-42`) as an attribute, and the
   * tenant of calls that name one (`tenant`, as the adapters' `tenant`
   * option passes it). Off by default: tenant ids would make one series per
   * tenant.
   * @default false
   */
  tenantAttribute?: boolean;
  /**
   * Semaphore ids whose permits used and available are read with `stats()`
   * at every collection (one store round trip each).
   */
  track?: { semaphore: Semaphore; id: string }[];
}
