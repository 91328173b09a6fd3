/**
 * leasehold's events as Prometheus metrics (prom-client): `collectMetrics()`.
 *
 * @module leasehold/prometheus
 */
import { Counter, register as defaultRegistry, Gauge, Histogram, type Registry } from "prom-client";
import { watchEvents } from "../../src/observability/metrics.js";
import type { ExportOptions } from "../../src/observability/types.js";

/**
 * Options of {@link collectMetrics}.
 *
 * @example
 * ```ts
 * const options: PrometheusOptions = { registry: new Registry(), prefix: "api_leasehold_", track: [{ semaphore: slots, id: "openai" }] };
 * ```
 */
export interface PrometheusOptions extends ExportOptions {
  /** @default prom-client's default registry */
  registry?: Registry;
  /** Metric name prefix. @default "leasehold_" */
  prefix?: string;
}

const SECONDS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Registers leasehold's metrics on a prom-client registry, for users without
 * OpenTelemetry: the same figures as `leasehold/opentelemetry` (counters of
 * acquired, rejected, released and lost leases and of errors; wait and hold
 * histograms in seconds; the outstanding-leases leak gauge; permits used and
 * available for tracked ids). Labels carry the kind and the name, not the
 * tenant part of the id, unless `tenantAttribute` is set. Returns a function
 * that stops recording and removes the metrics.
 *
 * @example
 * ```ts
 * import { collectMetrics } from "leasehold/prometheus";
 * collectMetrics({ track: [{ semaphore: slots, id: "openai" }] });
 * app.get("/metrics", async (_req, res) => res.type("text/plain").send(await register.metrics()));
 * ```
 */
export function collectMetrics(options: PrometheusOptions = {}): () => void {
  const registry = options.registry ?? defaultRegistry;
  const prefix = options.prefix ?? "leasehold_";
  const series = options.tenantAttribute === true ? ["kind", "name", "id", "tenant"] : ["kind", "name"];
  const registers = [registry];
  const counter = (name: string, help: string, extra: string[] = []) =>
    new Counter({ name: `${prefix}${name}`, help, labelNames: [...series, ...extra], registers });
  const acquired = counter("acquired_total", "Leases granted.");
  const rejected = counter("rejected_total", "Acquires refused (full, queue full, wait expired).", ["reason"]);
  const released = counter("released_total", "Leases given back.");
  const lost = counter("lost_total", "Leases declared lost while their holder worked.");
  const renewErrors = counter("renew_errors_total", "Failed renewal round trips (not losses).");
  const storeErrors = new Counter({
    name: `${prefix}store_errors_total`,
    help: "Store calls that failed or timed out.",
    labelNames: ["store", "operation", "kind", "name"],
    registers,
  });
  const httpRejected = counter("http_rejected_total", "Requests refused by an HTTP adapter.", ["status", "reason"]);
  const storeDowns = new Counter({
    name: `${prefix}store_down_total`,
    help: "Times a store became unreachable (acquires then fail at once until a probe answers).",
    labelNames: ["store"],
    registers,
  });
  const wait = new Histogram({
    name: `${prefix}wait_seconds`,
    help: "Time callers waited for a lease.",
    labelNames: series,
    buckets: SECONDS,
    registers,
  });
  const hold = new Histogram({
    name: `${prefix}hold_seconds`,
    help: "Time leases were held.",
    labelNames: series,
    buckets: SECONDS,
    registers,
  });

  const watcher = watchEvents(
    {
      acquired: (attributes, waitedMs) => {
        acquired.inc(attributes);
        wait.observe(attributes, waitedMs / 1000);
      },
      rejected: (attributes, waitedMs) => {
        rejected.inc(attributes);
        const { reason: _, ...labels } = attributes;
        wait.observe(labels, waitedMs / 1000);
      },
      released: (attributes, heldMs) => {
        released.inc(attributes);
        hold.observe(attributes, heldMs / 1000);
      },
      lost: (attributes) => lost.inc(attributes),
      renewError: (attributes) => renewErrors.inc(attributes),
      storeError: (attributes) => storeErrors.inc({ kind: "", name: "", ...attributes }),
      storeDown: (attributes) => storeDowns.inc(attributes),
      httpRejected: (attributes) => httpRejected.inc(attributes),
    },
    options,
  );

  const outstanding = new Gauge({
    name: `${prefix}leases_outstanding`,
    help: "Leases this process holds: granted minus released or lost. Growing while the resource idles means a leak.",
    labelNames: series,
    registers,
    collect() {
      this.reset();
      for (const entry of watcher.outstanding()) this.set({ ...entry.attributes }, entry.count);
    },
  });
  const storeUp = new Gauge({
    name: `${prefix}store_up`,
    help: "1 while a store answers, 0 while it is down (as this process has seen it; a store never seen down is not listed).",
    labelNames: ["store"],
    registers,
    collect() {
      for (const { store, up } of watcher.stores()) this.set({ store }, up ? 1 : 0);
    },
  });
  const fromStats = (name: string, help: string, figure: "used" | "available" | "waiting") =>
    new Gauge({
      name: `${prefix}${name}`,
      help,
      labelNames: series,
      registers,
      async collect() {
        for (const { attributes, stats } of await watcher.tracked()) this.set({ ...attributes }, stats[figure]);
      },
    });
  const used = fromStats("permits_used", "Permits used of a tracked semaphore id.", "used");
  const available = fromStats("permits_available", "Permits available of a tracked semaphore id.", "available");
  const waiting = fromStats("queue_waiting", "Callers waiting in the queue of a tracked semaphore id.", "waiting");

  return () => {
    watcher.stop();
    for (const metric of [
      acquired,
      rejected,
      released,
      lost,
      renewErrors,
      storeErrors,
      storeDowns,
      storeUp,
      httpRejected,
      wait,
      hold,
      outstanding,
      used,
      available,
      waiting,
    ]) {
      registry.removeSingleMetric((metric as unknown as { name: string }).name);
    }
  };
}
