import { channel } from "node:diagnostics_channel";
import type { NotAcquiredReason } from "../errors/index.js";

/**
 * The `node:diagnostics_channel` names leasehold publishes on. Publishing
 * costs nothing while nobody subscribes: events are built only when a
 * channel has subscribers.
 *
 * @example
 * ```ts
 * import { subscribe } from "node:diagnostics_channel";
 * import { CHANNELS, type RejectedEvent } from "leasehold";
 * subscribe(CHANNELS.rejected, (event) => log.warn(event as RejectedEvent, "shed"));
 * ```
 */
export const CHANNELS = {
  /** A lease was granted: {@link AcquiredEvent}. */
  acquired: "leasehold:acquired",
  /** An acquire came back empty-handed: {@link RejectedEvent}. */
  rejected: "leasehold:rejected",
  /** A lease was given back: {@link ReleasedEvent}. */
  released: "leasehold:released",
  /** A lease was declared lost: {@link LostEvent}. */
  lost: "leasehold:lost",
  /** A renewal (or final release) round trip failed: {@link RenewErrorEvent}. */
  renewError: "leasehold:renew-error",
  /** The store failed a call: {@link StoreErrorEvent}. */
  storeError: "leasehold:store-error",
  /** A call could not reach the store: acquires fail at once until a probe answers: {@link StoreDownEvent}. */
  storeDown: "leasehold:store-down",
  /** The store answers again: {@link StoreUpEvent}. */
  storeUp: "leasehold:store-up",
  /** An HTTP adapter refused a request: {@link HttpRejectedEvent}. */
  httpRejected: "leasehold:http-rejected",
} as const;

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

/** The channels themselves, looked up once. */
export const channels = {
  acquired: channel(CHANNELS.acquired),
  rejected: channel(CHANNELS.rejected),
  released: channel(CHANNELS.released),
  lost: channel(CHANNELS.lost),
  renewError: channel(CHANNELS.renewError),
  storeError: channel(CHANNELS.storeError),
  storeDown: channel(CHANNELS.storeDown),
  storeUp: channel(CHANNELS.storeUp),
  httpRejected: channel(CHANNELS.httpRejected),
};

/** An id's name, for events and metrics: the id up to its first `:` (`openai` for `openai:tenant-42`). */
export function nameOf(id: string): string {
  const colon = id.indexOf(":");
  return colon === -1 ? id : id.slice(0, colon);
}

/** The subject of an id: its kind, its name (see `nameOf`), and the id. */
export function subjectOf(kind: "semaphore" | "lock", id: string, tenant?: string): Subject {
  const subject: Subject = { kind, name: nameOf(id), id };
  if (tenant !== undefined) subject.tenant = tenant;
  return subject;
}
