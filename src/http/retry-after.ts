import type { NotAcquiredReason } from "../errors.js";

/** An exponentially weighted average: recent requests count most. */
class Average {
  value: number | undefined;

  record(ms: number): void {
    this.value = this.value === undefined ? ms : this.value * 0.8 + ms * 0.2;
  }
}

/**
 * What this process has observed of a route's hold and wait times, to answer
 * Retry-After with what permits actually take rather than a constant.
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
   * outright (every permit, or every permit of the caller's tenant, taken): the typical hold, capped by the nearest lease expiry (the
   * latest a permit can stay taken). Refused after queueing or with the queue
   * full: the typical wait of those admitted from the queue, when there is one.
   */
  seconds(reason: NotAcquiredReason, nearestExpiryMs: number): number {
    const holds = this.#holds.value;
    const waits = this.#waits.value;
    const hold = holds === undefined ? nearestExpiryMs : Math.min(holds, nearestExpiryMs);
    // A tenant at its cap was refused outright too, on its own holders' expiry.
    const outright = reason === "full" || reason === "tenant-full";
    const ms = !outright && waits !== undefined ? Math.max(waits, 1) : hold;
    return Math.max(1, Math.ceil(ms / 1000));
  }
}
