// A lost lease's message says why it was lost and the fix for that cause (issue #27, defect 10):
// "raise leaseMs" fits a lease that ran out without a renewal, not one an operator released, one
// taken back after its client left, nor one taken back when its semaphore closed.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { createServer, request as httpRequest } from "node:http";
import express from "express";
import { describe, expect, it } from "vitest";
import { semaphore as expressSemaphore } from "../../../integrations/express/index.js";
import {
  CHANNELS,
  ClientAbortedError,
  LockLeaseLostError,
  lock,
  memoryStore,
  SemaphoreLeaseLostError,
  ShutdownError,
  semaphore,
} from "../../../src/index.js";
import { storeKey } from "../../../src/store/contract/keys.js";
import { listen } from "../../http/harness.js";
import { uniquePrefix } from "../../support/redis.js";
import { eventually, gate, storesUnderTest } from "../../support/stores.js";

/** Resolves the reason `signal` aborts with. */
const abortReason = (signal: AbortSignal): Promise<unknown> =>
  new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

describe.each(storesUnderTest)("the message of a lost lease on the $name store", ({ make }) => {
  it("a lease that ran out without a renewal: raise leaseMs / ttlMs, or lower heartbeatMs", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore({ client: make(), limit: 1, prefix, leaseMs: 150 });
    const lease = await slots.acquire("k");
    const lost = await abortReason(lease?.signal as AbortSignal);
    expect(lost).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(message(lost)).toMatch(/ran out without a renewal/);
    expect(message(lost)).toMatch(/raise leaseMs/);
    const locks = lock({ client: make(), prefix, ttlMs: 150 });
    const held = await locks.acquire("l");
    const gone = await abortReason(held?.signal as AbortSignal);
    expect(gone).toBeInstanceOf(LockLeaseLostError);
    expect(message(gone)).toMatch(/ran out without a renewal/);
    expect(message(gone)).toMatch(/raise ttlMs/);
  });

  it("a lease the store says is no longer ours (an operator's release): no advice to raise the lease", async () => {
    const store = make();
    const prefix = uniquePrefix();
    const slots = semaphore({ client: store, limit: 1, prefix, leaseMs: 60_000 });
    const lease = await slots.acquire("k");
    // As `leasehold release` does: the holder's token, released through the store.
    expect(await store.semaphore.release({ storeKey: storeKey(prefix, "semaphore", "k"), token: lease?.token as string })).toBe(
      true,
    );
    expect(await lease?.extend()).toBe(false);
    const lost = await abortReason(lease?.signal as AbortSignal);
    expect(lost).toBeInstanceOf(SemaphoreLeaseLostError);
    expect(message(lost)).toMatch(/no longer this holder's/);
    expect(message(lost)).toMatch(/leasehold release/);
    expect(message(lost)).not.toMatch(/raise leaseMs/);

    const locks = lock({ client: store, prefix, ttlMs: 60_000 });
    const held = await locks.acquire("l");
    expect(await store.lock.release({ storeKey: storeKey(prefix, "lock", "l"), token: held?.token as string })).toBe(true);
    expect(await held?.extend()).toBe(false);
    const gone = await abortReason(held?.signal as AbortSignal);
    expect(gone).toBeInstanceOf(LockLeaseLostError);
    expect(message(gone)).toMatch(/no longer this holder's/);
    expect(message(gone)).not.toMatch(/raise ttlMs/);
  });

  it("a lease taken back when its semaphore closed while the work went on: stop on the signal, or a longer graceMs", async () => {
    const slots = semaphore({ client: make(), limit: 1, prefix: uniquePrefix(), leaseMs: 60_000 });
    const { opened, open } = gate();
    // A body that ignores its signal: it goes on past close()'s grace.
    const running = slots.run("k", () => opened).catch((error: unknown) => error);
    await eventually(async () => (await slots.count("k")) === 1);
    await slots.close({ graceMs: 50 });
    open();
    const lost = await running;
    expect(lost).toBeInstanceOf(SemaphoreLeaseLostError);
    expect((lost as Error).cause).toBeInstanceOf(ShutdownError);
    expect(message(lost)).toMatch(/closed/);
    expect(message(lost)).toMatch(/graceMs/);
    expect(message(lost)).not.toMatch(/raise leaseMs/);
  });
});

describe("the message of a lease lost after its client left", () => {
  it("names the disconnect and the grace, not the lease length", async () => {
    const { opened, open } = gate();
    // The signal aborts with the ClientAbortedError when the client leaves; the loss, once the
    // grace has passed, is told to the `lost` channel (and the adapter's onLeaseLost).
    const lostErrors: unknown[] = [];
    const onLost = (event: unknown) => lostErrors.push((event as { error: unknown }).error);
    subscribe(CHANNELS.lost, onLost);
    let entered = false;
    const app = express();
    app.get("/work", expressSemaphore("work", 1, { client: memoryStore(), disconnectGraceMs: 100 }), async (_req, res) => {
      entered = true;
      // Ignores its signal: it goes on past the grace after the client leaves.
      await opened;
      res.end("done");
    });
    const running = await listen(createServer(app));
    try {
      const client = httpRequest(`${running.url}/work`);
      client.on("error", () => {});
      client.end();
      await eventually(() => entered);
      client.destroy();
      await eventually(() => lostErrors.length === 1);
      const [lost] = lostErrors;
      expect(lost).toBeInstanceOf(SemaphoreLeaseLostError);
      expect((lost as Error).cause).toBeInstanceOf(ClientAbortedError);
      expect(message(lost)).toMatch(/client disconnected/);
      expect(message(lost)).toMatch(/disconnectGraceMs/);
      expect(message(lost)).not.toMatch(/raise leaseMs/);
    } finally {
      unsubscribe(CHANNELS.lost, onLost);
      open();
      await running.close();
    }
  });
});
