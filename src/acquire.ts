import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { StoreSource } from "./client.js";
import type { AcquireReply, Store } from "./store/types.js";
import { acquireOrCleanUp } from "./store-call.js";

/** A fresh lease token: 128 random bits, so no other holder can guess or collide with it. */
export function newToken(): string {
  return randomBytes(16).toString("base64url");
}

/** The store key of an id: a Redis Cluster hash tag around prefix and id, so every companion key shares its slot. */
export function storeKey(prefix: string, id: string): string {
  return `{${prefix}:${id}}`;
}

export type Acquired = { acquired: true; store: Store; token: string; sentAt: number };
export type Refused = { acquired: false; retryAfterMs: number };

/**
 * Tries to take a lease, `1 + retries` times, `retryDelayMs` apart, with one
 * token throughout (so a late answer to an earlier attempt is the same
 * lease). `sentAt` is when the winning attempt was sent: the lease's deadline
 * counts from there.
 */
export async function acquireLease(
  source: StoreSource,
  retries: number,
  retryDelayMs: number,
  take: (store: Store, token: string) => Promise<AcquireReply>,
  give: (store: Store, token: string) => Promise<boolean>,
  signal?: AbortSignal,
): Promise<Acquired | Refused> {
  signal?.throwIfAborted();
  const store = await source.get();
  const token = newToken();
  for (let attempt = 0; ; attempt++) {
    const sentAt = performance.now();
    const reply = await acquireOrCleanUp(
      store,
      () => take(store, token),
      () => give(store, token),
    );
    if (signal?.aborted) {
      // The caller gave up while the attempt was in flight: nobody will use this permit.
      if (reply.acquired) give(store, token).catch(() => {});
      throw signal.reason;
    }
    if (reply.acquired) return { acquired: true, store, token, sentAt };
    if (attempt >= retries) return { acquired: false, retryAfterMs: reply.retryAfterMs };
    if (retryDelayMs > 0) await pauseUnlessAborted(retryDelayMs, signal);
  }
}

/** Waits between attempts; an abort ends the wait at once with the signal's own reason. */
async function pauseUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal === undefined ? undefined : { signal });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  }
}
