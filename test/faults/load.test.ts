import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { semaphore } from "../../src/index.js";
import { startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";
import { FAULT_CLIENTS, through } from "./clients.js";
import { hrnow, msBetween, ownRedis, STARTING_MS, servers, sleep, startLoads, stopAll, verdictOf } from "./harness.js";
import { startLoad } from "./history.js";
import { report } from "./report.js";

afterEach(stopAll);

describe("history checker under load and process faults", () => {
  it("1. baseline: 3 processes x 50 callers, limit 20", async () => {
    const server = await ownRedis();
    const settings = { url: server.url, prefix: "baseline", limit: 20, leaseMs: 2000 };
    const loads = startLoads(server.url, settings.prefix, {
      processes: 3,
      callers: 50,
      limit: 20,
      leaseMs: 2000,
      durationMs: 4000,
    });
    await Promise.all(loads.map((load) => load.finished));
    const { verdict, leaks } = await verdictOf("1. baseline 3x50, limit 20", loads, settings);
    expect(verdict.unexplained).toBe(0);
    expect(verdict.maxHolders).toBeLessThanOrEqual(20);
    expect(verdict.maxHolders).toBe(20);
    expect(verdict.errors).toBe(0);
    expect(leaks).toBe(0);
  });

  it("2. SIGKILL a process holding leases: its slots come back within one lease, never before", async () => {
    const server = await ownRedis();
    const leaseMs = 2000;
    const settings = { url: server.url, prefix: "sigkill", limit: 5, leaseMs };
    const [doomed] = startLoads(server.url, settings.prefix, {
      processes: 1,
      callers: 5,
      limit: 5,
      leaseMs,
      durationMs: 60_000,
      holdMin: 60_000,
      holdMax: 60_000,
    });
    await eventually(() => doomed!.events.filter((e) => e.e === "enter").length === 5, STARTING_MS);
    const client = new Redis(server.url);
    const slots = semaphore(client, { prefix: settings.prefix, limit: 5 });
    await sleep(leaseMs); // several renewals happen: the leases are alive and renewed
    doomed!.killedAt = hrnow();
    doomed!.child.kill("SIGKILL");
    await doomed!.finished;
    expect(await slots.acquire("k")).toBeNull();
    await eventually(async () => (await slots.count("k")) === 0, leaseMs + 3_000, 20);
    const reclaimedAfter = msBetween(doomed!.killedAt, hrnow());
    client.disconnect();
    // The last renewal came at most a quarter lease before the kill: the slots return between 3/4 and 1 lease after it.
    const ok = reclaimedAfter >= leaseMs * 0.5 && reclaimedAfter <= leaseMs + 1_000;
    const { verdict, leaks } = await verdictOf(
      "2. SIGKILL a holder",
      [doomed!],
      settings,
      ok,
      `reclaimed ${Math.round(reclaimedAfter)} ms after the kill`,
    );
    expect(reclaimedAfter).toBeGreaterThanOrEqual(leaseMs * 0.5);
    expect(reclaimedAfter).toBeLessThanOrEqual(leaseMs + 1_000);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
  });

  it("3. SIGSTOP a holder past its lease, then SIGCONT: not revived, told at once", async () => {
    const server = await ownRedis();
    const leaseMs = 1000;
    const settings = { url: server.url, prefix: "sigstop", limit: 1, leaseMs };
    const [stopped] = startLoads(server.url, settings.prefix, {
      processes: 1,
      callers: 1,
      limit: 1,
      leaseMs,
      durationMs: 200,
      holdMin: 4000,
      holdMax: 4000,
    });
    await eventually(() => stopped!.events.some((e) => e.e === "enter"), STARTING_MS);
    stopped!.child.kill("SIGSTOP");
    const client = new Redis(server.url);
    const slots = semaphore(client, { prefix: settings.prefix, limit: 1 });
    let successor = await slots.acquire("k");
    await eventually(async () => {
      successor ??= await slots.acquire("k", { leaseMs: 30_000 });
      return successor !== null;
    }, leaseMs + 3_000);
    await sleep(500);
    const resumedAt = hrnow();
    stopped!.child.kill("SIGCONT");
    await eventually(() => stopped!.events.some((e) => e.e === "lost"), 5_000);
    const lostEvent = stopped!.events.find((e) => e.e === "lost")!;
    const toldAfter = msBetween(resumedAt, lostEvent.t);
    // Its lease was not revived: the successor still holds the only permit.
    expect(await successor!.extend()).toBe(true);
    expect(await slots.count("k")).toBe(1);
    await successor!.release();
    await stopped!.finished;
    client.disconnect();
    const { verdict, leaks } = await verdictOf(
      "3. SIGSTOP past the lease, SIGCONT",
      [stopped!],
      settings,
      toldAfter < 1_000,
      `told ${Math.round(toldAfter)} ms after SIGCONT`,
    );
    expect(toldAfter).toBeLessThan(1_000);
    expect(stopped!.events.some((e) => e.e === "run-lost")).toBe(true);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
  });

  it("4. a holder blocking its event loop past its lease: run rejects with the LeaseLost error", async () => {
    const server = await ownRedis();
    const settings = { url: server.url, prefix: "block", limit: 2, leaseMs: 400 };
    const loads = startLoads(server.url, settings.prefix, {
      processes: 1,
      callers: 2,
      limit: 2,
      leaseMs: 400,
      durationMs: 2_000,
      extraEnv: () => ({ BLOCK_MS: 700 }),
    });
    await Promise.all(loads.map((load) => load.finished));
    const runs = loads[0]!.events.filter((e) => e.e === "enter").length;
    const rejected = loads[0]!.events.filter((e) => e.e === "run-lost").length;
    const { verdict, leaks } = await verdictOf(
      "4. event loop blocked past the lease",
      loads,
      settings,
      runs > 0 && rejected === runs,
    );
    expect(runs).toBeGreaterThan(0);
    expect(rejected).toBe(runs);
    expect(loads[0]!.events.some((e) => e.e === "released")).toBe(false);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
  });

  it.each(FAULT_CLIENTS)(
    "5. Redis restart without persistence: scripts reload, every holder learns its lease is gone (%s)",
    async (client) => {
      let server = await ownRedis();
      const settings = { url: server.url, prefix: "restart", limit: 10, leaseMs: 2000 };
      const loads = startLoads(server.url, settings.prefix, {
        processes: 3,
        callers: 20,
        limit: 10,
        leaseMs: 2000,
        durationMs: 6000,
        // Holds long enough that the holders at the restart are still working when Redis is back, so
        // their next renewal (not only a release that may time out while Redis is away) finds the lease gone.
        holdMin: 900,
        holdMax: 1500,
        extraEnv: () => ({ CLIENT: client }),
      });
      // Restart only once the workers hold leases (starting them takes a while on a busy machine).
      await eventually(() => loads.flatMap((load) => load.events).filter((e) => e.e === "enter").length >= 10, STARTING_MS);
      await sleep(300);
      await server.stop();
      servers.splice(servers.indexOf(server), 1);
      server = await startRedisServer([], server.port);
      servers.push(server);
      await Promise.all(loads.map((load) => load.finished));
      const { verdict, leaks } = await verdictOf(`5. Redis restart, no persistence${through(client)}`, loads, settings);
      expect(verdict.declaredLosses).toBeGreaterThan(0);
      expect(verdict.unexplained).toBe(0);
      expect(leaks).toBe(0);
      // Work resumed after the restart: admissions on the new server.
      expect(verdict.operations).toBeGreaterThan(25);
    },
  );

  it.each(FAULT_CLIENTS)("6. SCRIPT FLUSH under load: no error reaches callers (%s)", async (client) => {
    const server = await ownRedis();
    const settings = { url: server.url, prefix: "flush", limit: 10, leaseMs: 2000 };
    const loads = startLoads(server.url, settings.prefix, {
      processes: 2,
      callers: 20,
      limit: 10,
      leaseMs: 2000,
      durationMs: 3000,
      extraEnv: () => ({ CLIENT: client }),
    });
    const admin = new Redis(server.url);
    let flushes = 0;
    const until = performance.now() + 2500;
    while (performance.now() < until) {
      await admin.script("FLUSH");
      flushes++;
      await sleep(50);
    }
    admin.disconnect();
    await Promise.all(loads.map((load) => load.finished));
    const { verdict, leaks } = await verdictOf(
      `6. SCRIPT FLUSH under load${through(client)}`,
      loads,
      settings,
      true,
      `${flushes} flushes`,
    );
    expect(verdict.errors).toBe(0);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
  });

  it.each([
    ["CLIENT PAUSE", (admin: Redis) => admin.client("PAUSE", 3000, "ALL")],
    ["DEBUG SLEEP", (admin: Redis) => admin.call("DEBUG", "SLEEP", "3")],
  ])("7. %s longer than a lease: holders are told by the deadline rule", async (fault, inject) => {
    const server = await ownRedis();
    const leaseMs = 1000;
    const prefix = fault === "CLIENT PAUSE" ? "pause" : "sleep";
    const settings = { url: server.url, prefix, limit: 5, leaseMs };
    const loads = startLoads(server.url, prefix, {
      processes: 1,
      callers: 5,
      limit: 5,
      leaseMs,
      durationMs: 200,
      holdMin: 5000,
      holdMax: 5000,
    });
    await eventually(() => loads[0]!.events.filter((e) => e.e === "enter").length === 5, STARTING_MS);
    const admin = new Redis(server.url);
    const faultAt = hrnow();
    inject(admin).catch(() => {});
    await eventually(() => loads[0]!.events.filter((e) => e.e === "lost").length === 5, 10_000);
    const told = loads[0]!.events.filter((e) => e.e === "lost").map((e) => msBetween(faultAt, e.t));
    await Promise.all(loads.map((load) => load.finished));
    admin.disconnect();
    const latest = Math.max(...told);
    const { verdict, leaks } = await verdictOf(
      `7. ${fault} 3 s, lease 1 s`,
      loads,
      settings,
      latest <= leaseMs + 500,
      `all told within ${Math.round(latest)} ms`,
    );
    // Told within one lease of the last renewal (which came at most a quarter lease before the fault).
    expect(latest).toBeLessThanOrEqual(leaseMs + 500);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
  });

  it("15. waiting room: queued waiters, weights 1-3, limits 4/6/8, a process killed mid-run", async () => {
    const server = await ownRedis();
    const leaseMs = 1500;
    const settings = { url: server.url, prefix: "waiting", limit: 8, leaseMs };
    const loads = startLoads(server.url, settings.prefix, {
      processes: 3,
      callers: 12,
      limit: 8,
      leaseMs,
      durationMs: 5000,
      holdMin: 5,
      holdMax: 80,
      extraEnv: () => ({ LIMITS: "4,6,8", WEIGHT_MAX: 3, WAIT_MS: 1500, WAITER_LEASE_MS: 900 }),
    });
    // One process dies with leases held and waiters queued: its grants and places must lapse, not block or leak.
    await eventually(() => (loads[0]?.events.filter((e) => e.e === "enter").length ?? 0) > 20, STARTING_MS);
    loads[0]!.killedAt = hrnow();
    loads[0]!.child.kill("SIGKILL");
    await Promise.all(loads.map((load) => load.finished));
    const { verdict, leaks } = await verdictOf("15. waiting room, weights, mixed limits, SIGKILL", loads, settings);
    expect(verdict.unexplained).toBe(0);
    expect(verdict.errors).toBe(0);
    expect(leaks).toBe(0);
    // The queue kept moving after the kill: the survivors went on being admitted.
    const after = loads.slice(1).flatMap((load) => load.events.filter((e) => e.e === "enter" && e.t > loads[0]!.killedAt!));
    expect(after.length).toBeGreaterThan(20);
  });

  it("12. client clock skew of plus or minus one lease on one process changes nothing", async () => {
    const server = await ownRedis();
    const leaseMs = 2000;
    const settings = { url: server.url, prefix: "skew", limit: 10, leaseMs };
    const loads = startLoads(server.url, settings.prefix, {
      processes: 3,
      callers: 15,
      limit: 10,
      leaseMs,
      durationMs: 3000,
      extraEnv: (index) => ({ SKEW_MS: [leaseMs, -leaseMs, 0][index] as number }),
    });
    await Promise.all(loads.map((load) => load.finished));
    const { verdict, leaks } = await verdictOf("12. client clock skew +/- one lease", loads, settings);
    expect(verdict.unexplained).toBe(0);
    expect(verdict.maxHolders).toBeLessThanOrEqual(10);
    expect(verdict.declaredLosses).toBe(0);
    expect(leaks).toBe(0);
    void startLoad;
    void report;
  });
});
