// Speed mechanism: a waiter the store serves itself. A store in this process (the embedded store)
// keeps the waiter queued without refreshes and hands it a freed permit from inside the releasing
// call: no waiting room to share, no grant to announce, no claim round trip. It pays for itself: on
// the memory store (limit 16, 64 queueing loops) a task costs about 18,000 instructions through the
// hand-off against 68,000 through the waiting room.
import type { LeaseCall } from "../lease/call.js";
import type { CallSettings } from "../options/settings.js";
import { offAbort, onAbort } from "../runtime/aborts.js";
import { foregroundTimers, type Soon } from "../runtime/timers.js";
import { isPending } from "../store/access/bounded.js";
import type { InProcessWaiter } from "../store/contract/calls.js";
import type { AcquireReply, Answer, Store } from "../store/contract/types.js";
import { acquired, refused } from "./outcomes.js";
import type { Acquired, Refused } from "./types.js";

const ignore = (): void => {};

/** A store call whose answer nobody waits for: a failure of it is the store's, already published. */
function regardless(answer: Answer<unknown>): void {
  if (isPending(answer)) answer.catch(ignore);
}

/**
 * The join of a wait a store may serve itself (`QueueOptions.waiter`). When
 * the store answers `handedOff`, the wait's outcome is {@link queued}'s
 * promise: a grant resolves it from inside the call that freed the permit
 * (which only resolves it: the rest runs after), with a full lease. It keeps
 * one shared timer (one Node timer per millisecond for all): at the end of
 * `waitMs`, or sooner to look at the id when its nearest lease ends (see
 * `#wake`); armed at the end of the turn, so a waiter served within it never
 * arms one. A join the store did not take costs this object only.
 */
export class HandOffWait implements InProcessWaiter {
  readonly leaseMs: number;
  readonly until: number;
  readonly maxQueue: number;
  #resolve: ((outcome: Acquired | Refused) => void) | undefined;
  #reject: ((error: unknown) => void) | undefined;
  /** Granted or closed before the engine heard the join's answer (a store that answers late): told by `queued`. */
  #early: { had: Acquired } | { error: Error } | undefined;
  #done = false;
  #timer: Soon | undefined;
  /** The join's reply, for the refusal at the end of the wait. */
  #reply: AcquireReply | undefined;
  #woken: (() => void) | undefined;
  #aborted: (() => void) | undefined;

  constructor(
    private readonly store: Store,
    private readonly settings: CallSettings,
    private readonly call: LeaseCall,
    private readonly token: string,
    private readonly startedAt: number,
  ) {
    this.leaseMs = call.leaseMs;
    this.until = startedAt + settings.waitMs;
    this.maxQueue = settings.maxQueue;
  }

  /** The store took it (`reply`, at `sentAt`, the clock read just now): the wait's outcome. */
  queued(reply: AcquireReply, sentAt: number): Promise<Acquired | Refused> {
    const early = this.#early;
    if (early !== undefined) return "had" in early ? Promise.resolve(early.had) : Promise.reject(early.error);
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
  onGrant(at: number, fence: number, record?: object): void {
    if (!this.#end()) return;
    // Waited until the grant (`at`, the freeing call's time): no clock read of its own.
    const had = acquired(this.store, this.token, fence, at, this.startedAt, at - this.startedAt, record);
    if (this.#resolve === undefined) this.#early = { had };
    else this.#resolve(had);
  }

  /** The store closed while waiting: only rejects. */
  onClose(error: Error): void {
    if (!this.#end()) return;
    if (this.#reject === undefined) this.#early = { error };
    else this.#reject(error);
  }

  #end(): boolean {
    if (this.#done) return false;
    this.#done = true;
    foregroundTimers.drop(this.#timer);
    const { signal } = this.settings;
    if (signal !== undefined && this.#aborted !== undefined) offAbort(signal, this.#aborted);
    return true;
  }

  #abort(): void {
    if (!this.#end()) return;
    regardless(this.call.leave(this.store, this.token));
    this.#reject?.(this.settings.signal?.reason);
  }

  /** The next wake: when the nearest lease ends (`ms` from `now`), or the wait's end if sooner. */
  #wakeIn(now: number, ms: number): void {
    this.#timer = foregroundTimers.soon(Math.min(now + ms, this.until), this.#woken as () => void);
  }

  // A holder whose lease lapses (it stalled, or stopped renewing) frees its permit only when
  // something looks: look when the nearest lease ends (a refresh of the waiters, which grants who
  // fits, this one included), and again then if it was renewed.
  #wake(): void {
    this.#timer = undefined;
    if (this.#done) return;
    const { call, token, store } = this;
    const now = performance.now();
    if (now >= this.until) {
      this.#end();
      regardless(call.leave(store, token));
      this.#resolve?.(refused(call, this.#reply as AcquireReply, "wait-timeout", this.startedAt));
      return;
    }
    let answer: ReturnType<LeaseCall["refresh"]>;
    try {
      answer = call.refresh(store, [token], 0);
    } catch (error) {
      if (this.#end()) this.#reject?.(error);
      return;
    }
    if (isPending(answer)) {
      answer.then(
        (refresh) => {
          if (!this.#done) this.#wakeIn(performance.now(), refresh.retryAfterMs);
        },
        (error: unknown) => {
          if (this.#end()) this.#reject?.(error);
        },
      );
    } else if (!this.#done) this.#wakeIn(now, answer.retryAfterMs);
  }
}
