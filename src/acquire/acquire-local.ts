import type { LeaseCall } from "../lease/call.js";
import type { CallSettings } from "../options/settings.js";
import { offAbort, onAbort, pauseUnlessAborted } from "../runtime/aborts.js";
import { foregroundTimers, type Soon } from "../runtime/timers.js";
import type { AcquireReply } from "../store/contract/types.js";
import type { LocalStore } from "../store/memory/local.js";
import type { LocalJoin } from "../store/memory/queue.js";
import { acquired, refused, why } from "./outcomes.js";
import type { Acquired, Refused } from "./types.js";

/**
 * The embedded store answers at once, and hands a freed permit straight to a
 * waiter of this process: no round trip to bound, no waiting room to share,
 * no grant to announce and claim. Same modes, same outcomes. `now`: the
 * clock read just now, when the token was made (the first attempt's time).
 */
export function acquireLocally(
  store: LocalStore,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  now: number,
): Acquired | Refused | Promise<Acquired | Refused> {
  if (settings.waitMs > 0) return waitLocally(store, settings, call, token, startedAt, now);
  return spinLocally(store, settings, call, token, startedAt, now);
}

/**
 * Takes at once or joins the queue (`now`: the clock read just now). Only a
 * call that queues makes a promise, a timer and an abort listener: one that
 * is admitted or refused at once answers in this turn, as failing fast does.
 */
function waitLocally(
  store: LocalStore,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  now: number,
): Acquired | Refused | Promise<Acquired | Refused> {
  const wait = new LocalWait(store, settings, call, token, startedAt);
  const reply = store.waitNow(call.kind, call.storeKey, token, call.limit, call.weight, wait, call.tenant, now);
  if (reply.acquired) return acquired(store, token, reply.fence as number, now, startedAt, now - startedAt, reply.held);
  if (reply.queued !== true) return refused(call, reply, reply.queueFull === true ? "queue-full" : why(reply), startedAt);
  return wait.queued(reply, now);
}

async function spinLocally(
  store: LocalStore,
  settings: CallSettings,
  call: LeaseCall,
  token: string,
  startedAt: number,
  now: number,
): Promise<Acquired | Refused> {
  for (let count = 0; ; count++) {
    const sentAt = count === 0 ? now : performance.now();
    // Its first attempt is fresh (see `LocalStore`): a later one may find its own earlier grant.
    const reply = store.takeNow(
      call.kind,
      call.storeKey,
      token,
      call.limit,
      call.weight,
      call.leaseMs,
      call.tenant,
      count === 0 ? sentAt : undefined,
    );
    if (reply.acquired) return acquired(store, token, reply.fence as number, sentAt, startedAt, undefined, reply.held);
    if (count >= settings.retries) return refused(call, reply, why(reply), startedAt);
    if (settings.retryDelayMs > 0) await pauseUnlessAborted(settings.retryDelayMs, settings.signal);
    settings.signal?.throwIfAborted();
  }
}

/**
 * Queues as a waiter of this process: a release hands it the permit, with a
 * full lease, from inside the releasing call (which only resolves this
 * promise, with the lease record: the rest runs after it). The wait is its
 * own join (the store keeps it as the waiter's `local`) and keeps one shared
 * timer (one Node timer per millisecond for all): at the end of `waitMs`, or
 * sooner to look at the id when its nearest lease ends (see `#wake`); armed
 * at the end of the turn, so a waiter served within it never arms one.
 */
class LocalWait implements LocalJoin {
  readonly leaseMs: number;
  readonly until: number;
  readonly maxQueue: number;
  #resolve!: (outcome: Acquired | Refused) => void;
  #reject!: (error: unknown) => void;
  #done = false;
  #timer: Soon | undefined;
  /** The join's reply, for the refusal at the end of the wait. */
  #reply: AcquireReply | undefined;
  #woken: (() => void) | undefined;
  #aborted: (() => void) | undefined;

  constructor(
    private readonly store: LocalStore,
    private readonly settings: CallSettings,
    private readonly call: LeaseCall,
    private readonly token: string,
    private readonly startedAt: number,
  ) {
    this.leaseMs = call.leaseMs;
    this.until = startedAt + settings.waitMs;
    this.maxQueue = settings.maxQueue;
  }

  /** It joined the queue (`reply`, at `sentAt`, the clock read just now): the wait's outcome. */
  queued(reply: AcquireReply, sentAt: number): Promise<Acquired | Refused> {
    const outcome = new Promise<Acquired | Refused>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.#reply = reply;
    this.#woken = () => this.#wake();
    this.#wakeIn(sentAt, reply.retryAfterMs);
    const { signal } = this.settings;
    if (signal !== undefined) {
      this.#aborted = () => this.#abort();
      onAbort(signal, this.#aborted);
    }
    return outcome;
  }

  /** Granted (called by the store, from the call that freed the permit): only resolves. */
  onGrant(at: number, fence: number, held?: object): void {
    // Waited until the grant (`at`, the freeing call's time): no clock read of its own.
    if (this.#end()) this.#resolve(acquired(this.store, this.token, fence, at, this.startedAt, at - this.startedAt, held));
  }

  /** The store closed while waiting: only rejects. */
  onClose(error: Error): void {
    if (this.#end()) this.#reject(error);
  }

  #end(): boolean {
    if (this.#done) return false;
    this.#done = true;
    foregroundTimers.drop(this.#timer);
    const { signal } = this.settings;
    if (signal !== undefined) offAbort(signal, this.#aborted as () => void);
    return true;
  }

  #abort(): void {
    if (!this.#end()) return;
    this.store.leaveNow(this.call.kind, this.call.storeKey, this.token);
    this.#reject(this.settings.signal?.reason);
  }

  /** The next wake: when the nearest lease ends (`ms` from `now`), or the wait's end if sooner. */
  #wakeIn(now: number, ms: number): void {
    this.#timer = foregroundTimers.soon(Math.min(now + ms, this.until), this.#woken as () => void);
  }

  // A holder whose lease lapses (it stalled, or stopped renewing) frees its permit only when
  // something looks: look when the nearest lease ends, and again then if it was renewed.
  #wake(): void {
    this.#timer = undefined;
    if (this.#done) return;
    const { store, call } = this;
    const now = performance.now();
    if (now >= this.until) {
      this.#end();
      store.leaveNow(call.kind, call.storeKey, this.token);
      this.#resolve(refused(call, this.#reply as AcquireReply, "wait-timeout", this.startedAt));
      return;
    }
    const next = store.settleNow(call.kind, call.storeKey);
    if (!this.#done) this.#wakeIn(now, next);
  }
}
