import { channels } from "../observability/events.js";
import type { RenewErrorEvent } from "../observability/types.js";
import type { CallSettings } from "../options/settings.js";
import { backgroundTimers, type Soon } from "../runtime/timers.js";
import type { LeaseHandle } from "./handle.js";

/** How `run` keeps a lease while its body works: its `KeepingOptions`, resolved (see `CallSettings`). */
type KeptBy = Pick<CallSettings, "heartbeatMs" | "onRenewError">;

function report(lease: LeaseHandle, onRenewError: CallSettings["onRenewError"], error: unknown): void {
  if (channels.renewError.hasSubscribers) {
    channels.renewError.publish({ ...lease.subject, token: lease.token, error } satisfies RenewErrorEvent);
  }
  if (onRenewError === undefined) return;
  try {
    onRenewError(error);
  } catch {
    // A throwing hook must not crash the process from a timer, nor end the renewal.
  }
}

/**
 * Renewals due in this turn of the event loop, sent together once the timers
 * of this turn have run: a store gathers the calls of one turn on one id into
 * one round trip (the Redis store does), so a process holding many leases on
 * an id renews them with a few calls per heartbeat, not one per lease.
 */
const due: (() => void)[] = [];

function renewSoon(renew: () => void): void {
  if (due.length === 0) setImmediate(renewDue);
  due.push(renew);
}

function renewDue(): void {
  for (const renew of due.splice(0)) renew();
}

/**
 * When the next renewal tick falls: on a grid of `heartbeatMs` shared by every
 * lease of the process, at least half a heartbeat from now. Leases with the
 * same heartbeat then tick together (and renew in one call per id), and every
 * renewal still comes within 1.5 heartbeats of the last, well inside a lease
 * of at least two heartbeats; a body that ends within half a heartbeat costs
 * no renewal.
 */
function nextTick(now: number, heartbeatMs: number): number {
  return Math.ceil((now + heartbeatMs / 2) / heartbeatMs) * heartbeatMs;
}

/**
 * Runs `fn` while keeping `lease`: renews every `heartbeatMs` (never two
 * renewals at once; ticks are aligned across leases so that a store can send
 * the renewals of one id together), and declares the lease lost when a renewal answers "not
 * ours" or when its deadline (a full lease without a successful renewal)
 * passes. The deadline is checked on every tick, again in the same turn the
 * body settles (a body that blocks the event loop starves the timer), and the
 * final release's answer is consulted. Teardown order: stop the timer, wait
 * for a renewal in flight, release.
 *
 * A body may release the lease itself (it is done with the resource but not
 * with its work): from then on nothing is renewed and the deadline no longer
 * applies; that release's answer alone says whether the lease was lost, and
 * `run` sends no second one.
 *
 * On loss, `lease.signal` aborts with the LeaseLost error and the returned
 * promise rejects with that same error, even when `fn` resolved.
 *
 * No async frame: a body that settles at once, on a store that answers at
 * once (the embedded one), is given back in the same turn, and a body's
 * promise costs one `then` (each async layer here had cost a promise and
 * its ticks on every `run`).
 */
export function keepLease<L extends LeaseHandle, T>(
  lease: L,
  fn: (lease: L) => T | PromiseLike<T>,
  options: KeptBy,
  now?: number,
): Promise<T> {
  const keeping = new Keeping<T>(lease, options, now ?? performance.now());
  let result: T | PromiseLike<T>;
  let thenable: boolean;
  try {
    result = fn(lease);
    // Inside the try: a `then` getter that throws is the body's failure, as `await` made it.
    thenable = isThenable(result);
  } catch (error) {
    return ended(keeping, false, error);
  }
  if (!thenable) return ended(keeping, true, result);
  return Promise.resolve(result).then(
    (value) => keeping.end(true, value),
    (error: unknown) => keeping.end(false, error),
  );
}

/** `run`'s promise once its body settled at once. */
function ended<T>(keeping: Keeping<T>, ok: boolean, value: unknown): Promise<T> {
  try {
    const outcome = keeping.end(ok, value);
    return outcome instanceof Promise ? outcome : Promise.resolve(outcome);
  } catch (error) {
    return Promise.reject(error);
  }
}

function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** One lease being kept: its tick, its renewal in flight. A class, not closures: `run` makes one per call. */
class Keeping<T> {
  #timer: Soon | undefined;
  #renewal: Promise<void> | undefined;
  #done = false;
  readonly #tick = (): void => this.#ticked();

  /** `now`: a clock reading of this turn. */
  constructor(
    private readonly lease: LeaseHandle,
    private readonly options: KeptBy,
    now: number,
  ) {
    lease.kept = true;
    lease.keeper = this;
    // The tick's time is fixed now; its timer is armed at the end of the turn, if the body runs on.
    this.#schedule(now);
  }

  /**
   * The body settled (`ok`: with `value`, else with the error `value`): check
   * the deadline in this same turn, stop the timer, wait for a renewal in
   * flight, give back; then the body's outcome, or the LeaseLost error.
   * Synchronous when nothing needs waiting for (the embedded store).
   */
  end(ok: boolean, value: unknown): T | Promise<T> {
    this.lease.finishing = true;
    // Same turn as the body's completion: a timer cannot have run if the body blocked.
    const now = performance.now();
    this.#pastDeadline(now);
    this.#done = true;
    backgroundTimers.drop(this.#timer);
    if (this.#renewal !== undefined) return this.#renewal.then(() => this.#giveBack(ok, value, undefined));
    return this.#giveBack(ok, value, now);
  }

  /**
   * The final release of `run`. A release the body already made is waited for,
   * not repeated: one round trip, and its answer decides a loss. Only if the
   * store failed to answer it (the lease may still be held) is it sent again.
   * `now`: the clock read in this turn, if it was.
   */
  #giveBack(ok: boolean, value: unknown, now: number | undefined): T | Promise<T> {
    const early = this.lease.releasing;
    if (early === undefined) return this.#release(ok, value, now);
    return early.then(
      () => this.#outcome(ok, value),
      () => {
        // The body saw this failure itself; the deadline decides whether the lease was kept meanwhile.
        this.#pastDeadline(performance.now());
        return this.#release(ok, value, undefined);
      },
    );
  }

  #release(ok: boolean, value: unknown, now: number | undefined): T | Promise<T> {
    let answer: boolean | Promise<boolean>;
    try {
      answer = this.lease.giveBack(now);
    } catch (error) {
      this.#failedRelease(error);
      return this.#outcome(ok, value);
    }
    if (typeof answer === "boolean") return this.#outcome(ok, value);
    return answer.then(
      () => this.#outcome(ok, value),
      (error: unknown) => {
        this.#failedRelease(error);
        return this.#outcome(ok, value);
      },
    );
  }

  /** The store did not answer the release: the permit lapses with its lease. Not a loss. */
  #failedRelease(error: unknown): void {
    report(this.lease, this.options.onRenewError, error);
  }

  /** What `run` settles with: the LeaseLost error once the lease was lost (the body's failure as its cause), else the body's outcome. */
  #outcome(ok: boolean, value: unknown): T {
    const lost = this.lease.lost;
    if (lost !== undefined) {
      if (!ok && value !== lost && lost.cause === undefined) {
        // Keep the body's own failure reachable instead of dropping it.
        Object.defineProperty(lost, "cause", { value, configurable: true, writable: true });
      }
      throw lost;
    }
    if (!ok) throw value;
    return value as T;
  }

  // Once the holder has released, only that release's answer says whether the lease was lost.
  #pastDeadline(now: number): boolean {
    const { lease } = this;
    if (lease.releasing === undefined && now >= lease.deadline) lease.lose();
    return lease.lost !== undefined;
  }

  /**
   * The body shortened its lease (`extend(ms)`): a tick that lies past the new deadline comes at it
   * instead (the lease then lapses in the store before a renewal); an earlier one stays, and renews.
   */
  deadlineSooner(): void {
    const timer = this.#timer;
    if (this.#done || timer === undefined || timer.at <= this.lease.deadline) return;
    backgroundTimers.drop(timer);
    this.#timer = backgroundTimers.soon(this.lease.deadline, this.#tick);
  }

  #schedule(now: number): void {
    const { heartbeatMs } = this.options;
    const at = heartbeatMs === false ? this.lease.deadline : Math.min(nextTick(now, heartbeatMs), this.lease.deadline);
    // Shared per millisecond: leases on the heartbeat grid tick together, one Node timer for all.
    this.#timer = backgroundTimers.soon(at, this.#tick);
  }

  #renewNow(): void {
    const { lease } = this;
    if (this.#done || lease.releasing !== undefined || lease.lost !== undefined) {
      this.#renewal = undefined;
      return;
    }
    this.#renewal = lease
      .extend()
      .then(
        () => undefined,
        (error: unknown) => report(lease, this.options.onRenewError, error),
      )
      .finally(() => {
        this.#renewal = undefined;
      });
  }

  #ticked(): void {
    this.#timer = undefined;
    const early = this.lease.releasing;
    if (early !== undefined) {
      // Given back by its holder: nothing left to renew, unless the store failed to answer.
      early.then(undefined, () => {
        if (!this.#done && this.#timer === undefined) this.#ticked();
      });
      return;
    }
    if (this.#pastDeadline(performance.now())) return;
    if (this.options.heartbeatMs !== false && this.#renewal === undefined) {
      // Claimed now (never two at once), sent with the other renewals due in this turn.
      this.#renewal = Promise.resolve();
      renewSoon(() => this.#renewNow());
    }
    this.#schedule(performance.now());
  }
}
