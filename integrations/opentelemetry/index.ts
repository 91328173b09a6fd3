/**
 * leasehold's events as OpenTelemetry metrics: `instrument()`.
 *
 * @module leasehold/opentelemetry
 */
import { type Attributes, type Meter, type MeterProvider, metrics } from "@opentelemetry/api";
import { watchEvents } from "../../src/observability/metrics.js";
import type { ExportOptions, MetricAttributes } from "../../src/observability/types.js";

/**
 * Options of {@link instrument}.
 *
 * @example
 * ```ts
 * const options: InstrumentOptions = { meterProvider, track: [{ semaphore: slots, id: "openai" }] };
 * ```
 */
export interface InstrumentOptions extends ExportOptions {
  /** The meter to record on. @default one from `meterProvider`, named "leasehold" */
  meter?: Meter;
  /** @default the global meter provider */
  meterProvider?: MeterProvider;
}

const toAttributes = (attributes: MetricAttributes | Record<string, string | number | undefined>): Attributes =>
  Object.fromEntries(Object.entries(attributes).filter(([, value]) => value !== undefined)) as Attributes;

/**
 * Wires every leasehold event into an OpenTelemetry meter: counters of
 * acquired, rejected, released and lost leases, renewal, store and HTTP
 * errors; histograms of wait and hold time (ms); observable gauges of the
 * leases this process holds (the leak figure) and, for tracked ids, permits
 * used and available. Attributes carry the kind and the name, not the tenant
 * part of the id, unless `tenantAttribute` is set. Returns a function that
 * stops recording.
 *
 * @example
 * ```ts
 * import { instrument } from "leasehold/opentelemetry";
 * const stop = instrument({ track: [{ semaphore: slots, id: "openai" }] });
 * ```
 */
export function instrument(options: InstrumentOptions = {}): () => void {
  const meter = options.meter ?? (options.meterProvider ?? metrics.getMeterProvider()).getMeter("leasehold");
  const acquired = meter.createCounter("leasehold.acquired", { description: "Leases granted." });
  const rejected = meter.createCounter("leasehold.rejected", {
    description: "Acquires refused (full, queue full, wait expired).",
  });
  const released = meter.createCounter("leasehold.released", { description: "Leases given back." });
  const lost = meter.createCounter("leasehold.lost", { description: "Leases declared lost while their holder worked." });
  const renewErrors = meter.createCounter("leasehold.renew.errors", { description: "Failed renewal round trips (not losses)." });
  const storeErrors = meter.createCounter("leasehold.store.errors", { description: "Store calls that failed or timed out." });
  const httpRejected = meter.createCounter("leasehold.http.rejected", { description: "Requests refused by an HTTP adapter." });
  const storeDowns = meter.createCounter("leasehold.store.down", {
    description: "Times a store became unreachable (acquires then fail at once until a probe answers).",
  });
  const wait = meter.createHistogram("leasehold.wait.duration", { unit: "ms", description: "Time callers waited for a lease." });
  const hold = meter.createHistogram("leasehold.hold.duration", { unit: "ms", description: "Time leases were held." });

  const watcher = watchEvents(
    {
      acquired: (attributes, waitedMs) => {
        acquired.add(1, toAttributes(attributes));
        wait.record(waitedMs, toAttributes(attributes));
      },
      rejected: (attributes, waitedMs) => {
        rejected.add(1, toAttributes(attributes));
        const { reason: _, ...series } = attributes;
        wait.record(waitedMs, toAttributes(series));
      },
      released: (attributes, heldMs) => {
        released.add(1, toAttributes(attributes));
        hold.record(heldMs, toAttributes(attributes));
      },
      lost: (attributes) => lost.add(1, toAttributes(attributes)),
      renewError: (attributes) => renewErrors.add(1, toAttributes(attributes)),
      storeError: (attributes) => storeErrors.add(1, toAttributes(attributes)),
      storeDown: (attributes) => storeDowns.add(1, attributes),
      httpRejected: (attributes) => httpRejected.add(1, toAttributes(attributes)),
    },
    options,
  );

  const outstanding = meter.createObservableGauge("leasehold.leases.outstanding", {
    description: "Leases this process holds: granted minus released or lost. Growing while the resource idles means a leak.",
  });
  const used = meter.createObservableGauge("leasehold.permits.used", { description: "Permits used of a tracked semaphore id." });
  const available = meter.createObservableGauge("leasehold.permits.available", {
    description: "Permits available of a tracked semaphore id.",
  });
  const waiting = meter.createObservableGauge("leasehold.queue.waiting", {
    description: "Callers waiting in the queue of a tracked semaphore id.",
  });
  const storeUp = meter.createObservableGauge("leasehold.store.up", {
    description: "1 while a store answers, 0 while it is down (as this process has seen it).",
  });
  const observeStores = (result: { observe(value: number, attributes?: Attributes): void }) => {
    for (const { store, up } of watcher.stores()) result.observe(up ? 1 : 0, { store });
  };
  const observeOutstanding = (result: { observe(value: number, attributes?: Attributes): void }) => {
    for (const entry of watcher.outstanding()) result.observe(entry.count, toAttributes(entry.attributes));
  };
  const observeTracked = async (batch: { observe(metric: unknown, value: number, attributes?: Attributes): void }) => {
    for (const { attributes, stats } of await watcher.tracked()) {
      batch.observe(used, stats.used, toAttributes(attributes));
      batch.observe(available, stats.available, toAttributes(attributes));
      batch.observe(waiting, stats.waiting, toAttributes(attributes));
    }
  };
  outstanding.addCallback(observeOutstanding);
  storeUp.addCallback(observeStores);
  meter.addBatchObservableCallback(observeTracked as never, [used, available, waiting]);

  return () => {
    watcher.stop();
    outstanding.removeCallback(observeOutstanding);
    storeUp.removeCallback(observeStores);
    meter.removeBatchObservableCallback(observeTracked as never, [used, available, waiting]);
  };
}
