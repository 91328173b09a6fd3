import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import express from "express";
import { Registry } from "prom-client";
import request from "supertest";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore as guard } from "../../integrations/express/index.js";
import { instrument } from "../../integrations/opentelemetry/index.js";
import { collectMetrics } from "../../integrations/prometheus/index.js";
import { CHANNELS, memoryStore, SemaphoreLeaseLostError, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import type { Store } from "../../src/store/index.js";
import { spyStore } from "../support/stores.js";

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

const stops: (() => void)[] = [];
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
});

/**
 * The scripted run every exporter is checked against: 5 admits of "jobs"
 * (3 quick runs, 2 held), 2 rejections, 1 renewal error, 1 lost lease, 1 HTTP
 * refusal on "api", and 1 lease left outstanding. The failed renewal takes the
 * (spied) store down, and the next one brings it back up.
 */
async function script(raw: Store) {
  const { store } = spyStore(raw, { semaphoreExtend: (n) => (n === 1 ? "throw" : undefined) });
  const slots = semaphore({ client: store, limit: 2, prefix: "m" });
  for (let n = 0; n < 3; n++) await slots.run("jobs:tenant-a", async () => {});
  const held = [await slots.acquire("jobs:tenant-b"), await slots.acquire("jobs:tenant-b")];
  await slots.run("jobs:tenant-b", async () => {}).catch(() => {});
  await slots.run("jobs:tenant-b", async () => {}).catch(() => {});
  for (const lease of held) await lease?.release();
  // One failed renewal round trip (the first extend throws), then success: not a loss.
  await slots.run("jobs:tenant-c", () => new Promise((resolve) => setTimeout(resolve, 120)), { leaseMs: 1000, heartbeatMs: 20 });
  // A lease stolen from under its holder: lost.
  const lost = await slots
    .run(
      "jobs:tenant-d",
      async (lease) => {
        await raw.semaphore.release({ storeKey: storeKey("m", "semaphore", "jobs:tenant-d"), token: lease.token });
        await new Promise((resolve) => lease.signal.addEventListener("abort", resolve, { once: true }));
      },
      { heartbeatMs: 20 },
    )
    .catch((error: unknown) => error);
  expect(lost).toBeInstanceOf(SemaphoreLeaseLostError);
  // An HTTP refusal.
  const app = express();
  app.get("/", guard("api", 1, { client: store }), (_req, res) => void setTimeout(() => res.end("ok"), 100));
  const first = request(app)
    .get("/")
    .then((r) => r);
  await new Promise((resolve) => setTimeout(resolve, 30));
  expect((await request(app).get("/")).status).toBe(503);
  await first;
  // One lease never returned: the leak figure must show it.
  const leaked = await slots.acquire("jobs:tenant-e");
  return { slots, leaked };
}

describe("OpenTelemetry export", () => {
  it("every figure matches the scripted run, with one series per name", async () => {
    const reader = new TestReader();
    const provider = new MeterProvider({ readers: [reader] });
    const store = memoryStore();
    const tracked = semaphore({ client: store, limit: 2, prefix: "m" });
    stops.push(instrument({ meterProvider: provider, track: [{ semaphore: tracked, id: "jobs:tenant-e" }] }));
    await script(store);
    const { resourceMetrics } = await reader.collect();
    const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    const points = (name: string) => all.find((metric) => metric.descriptor.name === name)?.dataPoints ?? [];
    const sum = (name: string, filter: Record<string, unknown> = {}) =>
      points(name)
        .filter((point) => Object.entries(filter).every(([k, v]) => point.attributes[k] === v))
        .reduce(
          (total, point) => total + (typeof point.value === "number" ? point.value : (point.value as { count: number }).count),
          0,
        );

    expect(sum("leasehold.acquired", { name: "jobs" })).toBe(8);
    expect(sum("leasehold.acquired", { name: "api" })).toBe(1);
    expect(sum("leasehold.rejected", { name: "jobs", reason: "full" })).toBe(2);
    expect(sum("leasehold.rejected", { name: "api" })).toBe(1);
    expect(sum("leasehold.released", { name: "jobs" })).toBe(7);
    expect(sum("leasehold.lost", { name: "jobs" })).toBe(1);
    expect(sum("leasehold.renew.errors", { name: "jobs" })).toBe(1);
    expect(sum("leasehold.http.rejected", { name: "api", status: 503 })).toBe(1);
    expect(sum("leasehold.wait.duration", { name: "jobs" })).toBe(10);
    expect(sum("leasehold.hold.duration", { name: "jobs" })).toBe(7);
    expect(sum("leasehold.leases.outstanding", { name: "jobs" })).toBe(1);
    expect(sum("leasehold.permits.used", { name: "jobs" })).toBe(1);
    expect(sum("leasehold.permits.available", { name: "jobs" })).toBe(1);
    expect(sum("leasehold.queue.waiting", { name: "jobs" })).toBe(0);
    // The failed renewal could not reach the store: it went down, and the next renewal brought it up.
    expect(sum("leasehold.store.down", { store: "spy(memory)" })).toBe(1);
    expect(sum("leasehold.store.up", { store: "spy(memory)" })).toBe(1);
    // The tenant part never became an attribute.
    expect(points("leasehold.acquired").every((point) => !("id" in point.attributes))).toBe(true);
    expect(points("leasehold.acquired").filter((point) => point.attributes.name === "jobs")).toHaveLength(1);
  });

  it("10,000 tenant ids make one series per name", async () => {
    const reader = new TestReader();
    stops.push(instrument({ meterProvider: new MeterProvider({ readers: [reader] }) }));
    const slots = semaphore({ client: memoryStore(), limit: 1 });
    for (let n = 0; n < 10_000; n++) (await slots.acquire(`tenants:${n}`))?.release();
    const { resourceMetrics } = await reader.collect();
    const acquired = resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .find((metric) => metric.descriptor.name === "leasehold.acquired");
    expect(acquired?.dataPoints).toHaveLength(1);
    expect(acquired?.dataPoints[0]?.value).toBe(10_000);
  });
});

describe("Prometheus export", () => {
  it("every figure matches the scripted run, in prom-client's text output", async () => {
    const registry = new Registry();
    const store = memoryStore();
    const tracked = semaphore({ client: store, limit: 2, prefix: "m" });
    stops.push(collectMetrics({ registry, track: [{ semaphore: tracked, id: "jobs:tenant-e" }] }));
    await script(store);
    const text = await registry.metrics();
    const value = (line: string) =>
      Number(new RegExp(`^${line.replace(/[{}"()]/g, (c) => `\\${c}`)} (\\S+)$`, "m").exec(text)?.[1]);
    expect(value('leasehold_acquired_total{kind="semaphore",name="jobs"}')).toBe(8);
    expect(value('leasehold_rejected_total{kind="semaphore",name="jobs",reason="full"}')).toBe(2);
    expect(value('leasehold_released_total{kind="semaphore",name="jobs"}')).toBe(7);
    expect(value('leasehold_lost_total{kind="semaphore",name="jobs"}')).toBe(1);
    expect(value('leasehold_renew_errors_total{kind="semaphore",name="jobs"}')).toBe(1);
    expect(value('leasehold_http_rejected_total{kind="semaphore",name="api",status="503",reason="full"}')).toBe(1);
    expect(value('leasehold_wait_seconds_count{kind="semaphore",name="jobs"}')).toBe(10);
    expect(value('leasehold_hold_seconds_count{kind="semaphore",name="jobs"}')).toBe(7);
    expect(value('leasehold_leases_outstanding{kind="semaphore",name="jobs"}')).toBe(1);
    expect(value('leasehold_permits_available{kind="semaphore",name="jobs"}')).toBe(1);
    expect(value('leasehold_permits_used{kind="semaphore",name="jobs"}')).toBe(1);
    expect(value('leasehold_queue_waiting{kind="semaphore",name="jobs"}')).toBe(0);
    expect(value('leasehold_store_down_total{store="spy(memory)"}')).toBe(1);
    expect(value('leasehold_store_up{store="spy(memory)"}')).toBe(1);
    expect(text).not.toMatch(/tenant-/);
  });
});

describe("tenantAttribute", () => {
  it("adds the id and the tenant, of engine calls and adapter refusals alike, only when asked", async () => {
    const store = memoryStore();
    const slots = semaphore({ client: store, limit: 3, tenantLimit: 1, prefix: "t" });
    const app = express();
    app.get("/", guard("chat", 3, { client: store, tenant: (req) => req.get("x-tenant") ?? "", tenantLimit: 1 }), (_req, res) =>
      res.end(),
    );
    const scripted = async () => {
      const held = await slots.acquire("jobs", { tenant: "acme" });
      expect(await slots.acquire("jobs", { tenant: "acme" })).toBeNull();
      await held?.release();
      const holder = await semaphore({ client: store, limit: 3 }).acquire("chat", { tenant: "acme", tenantLimit: 1 });
      expect((await request(app).get("/").set("x-tenant", "acme")).status).toBe(429);
      await holder?.release();
    };

    const plain = new Registry();
    stops.push(collectMetrics({ registry: plain }));
    await scripted();
    const plainText = await plain.metrics();
    expect(plainText).toMatch(
      /leasehold_http_rejected_total\{kind="semaphore",name="chat",status="429",reason="tenant-full"\} 1/,
    );
    expect(plainText).not.toMatch(/acme/);
    for (const stop of stops.splice(0)) stop();

    const asked = new Registry();
    stops.push(collectMetrics({ registry: asked, tenantAttribute: true }));
    await scripted();
    const text = await asked.metrics();
    expect(text).toMatch(/leasehold_acquired_total\{kind="semaphore",name="jobs",id="jobs",tenant="acme"\} 1/);
    expect(text).toMatch(
      /leasehold_rejected_total\{kind="semaphore",name="jobs",id="jobs",tenant="acme",reason="tenant-full"\} 1/,
    );
    expect(text).toMatch(
      /leasehold_http_rejected_total\{kind="semaphore",name="chat",id="chat",tenant="acme",status="429",reason="tenant-full"\} 1/,
    );
  });
});

describe("diagnostics channels", () => {
  it("publish nothing and build nothing while nobody subscribes, and everything once someone does", async () => {
    const seen: string[] = [];
    const listener = (message: unknown) => seen.push((message as { id: string }).id);
    const slots = semaphore({ client: memoryStore(), limit: 1 });
    await slots.run("quiet", async () => {});
    subscribe(CHANNELS.acquired, listener);
    try {
      await slots.run("loud", async () => {});
    } finally {
      unsubscribe(CHANNELS.acquired, listener);
    }
    await slots.run("quiet-again", async () => {});
    expect(seen).toEqual(["loud"]);
  });
});
