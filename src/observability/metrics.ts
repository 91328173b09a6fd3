import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { CHANNELS, nameOf } from "./events.js";
import type {
  AcquiredEvent,
  ExportOptions,
  HttpRejectedEvent,
  LostEvent,
  MetricAttributes,
  MetricsSink,
  RejectedEvent,
  ReleasedEvent,
  RenewErrorEvent,
  StoreDownEvent,
  StoreErrorEvent,
  StoreUpEvent,
  Subject,
} from "./types.js";

/**
 * Subscribes a sink to every leasehold channel, and keeps the process-local
 * leak figure: leases granted to this process minus those released or lost.
 * A figure that only grows while the protected resource sits idle is the
 * signature of a leaked permit.
 */
export function watchEvents(sink: MetricsSink, options: ExportOptions = {}) {
  const withId = options.tenantAttribute === true;
  const attributes = (subject: Subject): MetricAttributes => {
    if (!withId) return { kind: subject.kind, name: subject.name };
    const attrs: MetricAttributes = { kind: subject.kind, name: subject.name, id: subject.id };
    if (subject.tenant !== undefined) attrs.tenant = subject.tenant;
    return attrs;
  };
  const outstanding = new Map<string, { attributes: MetricAttributes; count: number }>();
  /** Each store kind seen going down or up, and whether it is up now. */
  const stores = new Map<string, boolean>();
  const owners = new Map<string, string>();
  const seriesOf = (attrs: MetricAttributes) =>
    `${attrs.kind}\u0000${attrs.name}\u0000${attrs.id ?? ""}\u0000${attrs.tenant ?? ""}`;
  const settle = (token: string) => {
    const series = owners.get(token);
    if (series === undefined) return;
    owners.delete(token);
    const entry = outstanding.get(series);
    if (entry !== undefined) entry.count--;
  };

  const handlers: [string, (message: unknown) => void][] = [
    [
      CHANNELS.acquired,
      (message) => {
        const event = message as AcquiredEvent;
        const attrs = attributes(event);
        const series = seriesOf(attrs);
        const entry = outstanding.get(series) ?? { attributes: attrs, count: 0 };
        entry.count++;
        outstanding.set(series, entry);
        owners.set(event.token, series);
        sink.acquired(attrs, event.waitedMs);
      },
    ],
    [
      CHANNELS.rejected,
      (message) => {
        const event = message as RejectedEvent;
        sink.rejected({ ...attributes(event), reason: event.reason }, event.waitedMs);
      },
    ],
    [
      CHANNELS.released,
      (message) => {
        const event = message as ReleasedEvent;
        settle(event.token);
        sink.released(attributes(event), event.heldMs);
      },
    ],
    [
      CHANNELS.lost,
      (message) => {
        const event = message as LostEvent;
        settle(event.token);
        sink.lost(attributes(event));
      },
    ],
    [CHANNELS.renewError, (message) => sink.renewError(attributes(message as RenewErrorEvent))],
    [
      CHANNELS.storeError,
      (message) => {
        const event = message as StoreErrorEvent;
        sink.storeError({
          store: event.store,
          operation: event.operation,
          ...(event.kind ? { kind: event.kind } : {}),
          ...(event.name ? { name: event.name } : {}),
        });
      },
    ],
    [
      CHANNELS.storeDown,
      (message) => {
        const { store } = message as StoreDownEvent;
        stores.set(store, false);
        sink.storeDown({ store });
      },
    ],
    [CHANNELS.storeUp, (message) => stores.set((message as StoreUpEvent).store, true)],
    [
      CHANNELS.httpRejected,
      (message) => {
        const event = message as HttpRejectedEvent;
        sink.httpRejected({ ...attributes(event), status: event.status, reason: event.reason });
      },
    ],
  ];
  for (const [name, handler] of handlers) subscribe(name, handler);

  return {
    /** Leases this process holds, per series: the leak figure. */
    outstanding: () => [...outstanding.values()],
    /** Stores seen going down or up, and whether each is up now. */
    stores: () => [...stores].map(([store, up]) => ({ store, up })),
    /** Permits used and available of the tracked ids, read from the store. */
    tracked: async () =>
      Promise.all(
        (options.track ?? []).map(async ({ semaphore, id }) => {
          const stats = await semaphore.stats(id);
          const attrs: MetricAttributes = {
            kind: "semaphore",
            name: nameOf(id),
            ...(withId ? { id } : {}),
          };
          return { attributes: attrs, stats };
        }),
      ),
    stop: () => {
      for (const [name, handler] of handlers) unsubscribe(name, handler);
    },
  };
}
