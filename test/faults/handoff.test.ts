import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "../support/stores.js";
import { hrnow, ownRedis, STARTING_MS, sleep, startLoads, stopAll, verdictOf } from "./harness.js";
import { FaultProxy } from "./proxy.js";

const proxies: FaultProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  await stopAll();
});

// A granted waiter starts its work on the grant's announcement, without a claim round trip, on a
// deadline derived from the last call the store answered "still waiting" (see src/acquire/waiting.ts). These
// runs break that hand-off on purpose: a waiting process frozen past its waiter lease (its grants
// lapse while it sleeps, and it wakes up to stale announcements), replies stalled and dropped and
// connections cut while grants are in flight. The checker must find no holder over the limit that
// was not told, and nothing left behind.
describe("16. the hand-off of a freed permit to a waiter, under faults", () => {
  it("16. SIGSTOP past the waiter lease, stalls, dropped replies and cuts during hand-offs", async () => {
    const server = await ownRedis();
    const proxy = new FaultProxy(server.port);
    await proxy.listen();
    proxies.push(proxy);
    const leaseMs = 1500;
    const settings = { url: server.url, prefix: "handoff", limit: 4, leaseMs };
    const common = { processes: 1, callers: 8, limit: 4, leaseMs, durationMs: 7000, holdMin: 5, holdMax: 60 };
    const waiting = () => ({ WAIT_MS: 2500, WAITER_LEASE_MS: 600, WEIGHT_MAX: 2 });
    const loads = [
      ...startLoads(proxy.url, settings.prefix, { ...common, extraEnv: waiting }),
      ...startLoads(server.url, settings.prefix, { ...common, extraEnv: waiting }),
      ...startLoads(server.url, settings.prefix, { ...common, extraEnv: waiting }),
    ];
    const [behindProxy, frozen] = [loads[0]!, loads[2]!];
    const entered = () => loads.flatMap((load) => load.events).filter((e) => e.e === "enter").length;
    await eventually(() => entered() >= 30, STARTING_MS);

    // A waiting process frozen for longer than its waiter lease: its places and grants lapse meanwhile.
    frozen.child.kill("SIGSTOP");
    await sleep(1_500);
    frozen.child.kill("SIGCONT");
    await sleep(500);
    // Replies held back, then one dropped after Redis ran its command, then every connection cut.
    proxy.stall();
    await sleep(900);
    proxy.resume();
    await sleep(300);
    proxy.dropNextReply();
    await sleep(600);
    proxy.cut();
    const faultsEndedAt = hrnow();
    await Promise.all(loads.map((load) => load.finished));

    const { verdict, leaks } = await verdictOf("16. hand-off under SIGSTOP, stalls, drops, cuts", loads, settings);
    expect(verdict.unexplained).toBe(0);
    expect(leaks).toBe(0);
    // Work went on after the faults, in every process, the frozen one and the one behind the proxy included.
    for (const load of [behindProxy, frozen, loads[1]!]) {
      expect(load.events.some((e) => e.e === "enter" && e.t > faultsEndedAt)).toBe(true);
    }
  });
});
