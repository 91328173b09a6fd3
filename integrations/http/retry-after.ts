import type { LockNotAcquiredError, SemaphoreNotAcquiredError } from "../../src/errors/index.js";
import { RETRY_AFTER_DEFAULT_MS } from "../../src/options/defaults.js";

/** An exponentially weighted average: recent requests count most. */
class Average {
  value: number | undefined;

  record(ms: number): void {
    this.value = this.value === undefined ? ms : this.value * 0.8 + ms * 0.2;
  }
}

/**
 * What this process has observed of a route's hold and wait times, to answer
 * Retry-After with what permits actually take rather than a constant. The
 * store's record of the id's hold comes first: every process shares it, so a
 * fresh replica answers as a warm one does.
 */
export class RetryAfterEstimate {
  readonly #holds = new Average();
  readonly #waits = new Average();

  /** A request held its permit this long, from admission to release. */
  held(ms: number): void {
    this.#holds.record(ms);
  }

  /** A request waited this long in the queue before it was admitted. */
  waited(ms: number): void {
    this.#waits.record(ms);
  }

  /**
   * Whole seconds until a retry is likely to succeed, at least 1. Refused
   * outright (every permit, or every permit of the caller's tenant, taken):
   * the typical hold (the id's, as every process on the store recorded it;
   * else this route's, as this process saw it; else 1 s), capped by the
   * nearest lease expiry (the latest a permit can stay taken). Refused after
   * queueing or with the queue full: the typical wait of those admitted from
   * the queue, when there is one.
   */
  seconds(refusal: SemaphoreNotAcquiredError | LockNotAcquiredError): number {
    const waits = this.#waits.value;
    const typical = refusal.holdMs ?? this.#holds.value ?? RETRY_AFTER_DEFAULT_MS;
    const hold = Math.min(typical, refusal.expiresInMs);
    // A tenant at its cap was refused outright too, on its own holders' expiry.
    const outright = refusal.reason === "full" || refusal.reason === "tenant-full";
    const ms = !outright && waits !== undefined ? Math.max(waits, 1) : hold;
    return Math.max(1, Math.ceil(ms / 1000));
  }
}
