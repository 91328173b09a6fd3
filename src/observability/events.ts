import { channel } from "node:diagnostics_channel";
import type { Subject } from "./types.js";

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
