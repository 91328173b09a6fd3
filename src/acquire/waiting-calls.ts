import { type AcquireCalls, badReply, bounded, failed, send } from "../store/access/bounded.js";
import { breakerOf } from "../store/access/breaker.js";
import type { Grant, QueueOptions } from "../store/contract/calls.js";
import { isAcquireReply, isFunction, isGrant, isWaiterRefresh } from "../store/contract/replies.js";
import type { AcquireReply, Answer, Store, WaiterRefresh } from "../store/contract/types.js";

/** The calls a wait makes on its key, beyond those of any acquire. */
export interface WaitingCalls extends AcquireCalls {
  readonly kind: "semaphore" | "lock";
  /** The store key (`{prefix:kind:id}`). */
  readonly storeKey: string;
  refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Answer<WaiterRefresh>;
}

/** A claim in flight: `reply` under the store's bound and checked; `answer` the store's own, however late it comes. */
export interface Claim {
  reply: Promise<AcquireReply>;
  answer: Promise<AcquireReply>;
}

/**
 * The acquire a waiting token sends again to claim its grant or keep its
 * place. Unlike a first attempt, a claim that fails or times out cleans
 * nothing up: leaving would cost the waiter its place, and a release could
 * free the lease a later claim made usable (the store refreshes a token that
 * holds, idempotently). The wait decides what an unanswered claim means
 * when it ends.
 */
export function claim(store: Store, ops: WaitingCalls, token: string, queue: QueueOptions): Claim {
  // While the store is known to be unreachable, nothing is sent: the next wake-up claims again.
  const answer = send(() => {
    breakerOf(store)?.admit(ops.kind, ops.storeKey);
    return ops.take(store, token, queue);
  });
  return { reply: bounded(store, "acquire", answer, isAcquireReply, ops.subject), answer };
}

/** Keeps these waiters' leases alive, grants who fits, and says where each stands. */
export function refreshWaiters(
  store: Store,
  ops: WaitingCalls,
  tokens: readonly string[],
  waiterLeaseMs: number,
): Promise<WaiterRefresh> {
  return bounded(
    store,
    "refresh",
    send(() => ops.refresh(store, tokens, waiterLeaseMs)),
    isWaiterRefresh(tokens.length),
    ops.subject,
  );
}

/**
 * Listens for the grants made on `ops.storeKey`; resolves the function that stops
 * listening, which never throws (a store's that does is a store error: it is
 * called as a waiter settles). An announcement that is not a grant is a store
 * error, never a wake-up. A subscription that answers after the bound is
 * stopped when it does, so no listener is left behind.
 */
export function watchGrants(store: Store, ops: WaitingCalls, onGrant: (grant: Grant) => void): Promise<() => void> {
  const heard = (grant: Grant): void => {
    if (isGrant(grant)) onGrant(grant);
    else badReply(store, "grant", grant, ops.subject);
  };
  const answer = send(() => store.watch({ storeKey: ops.storeKey, onGrant: heard }));
  const stopping = (stop: unknown) => (): void => {
    try {
      if (typeof stop === "function") stop();
    } catch (error) {
      failed(store, "unwatch", error, ops.subject);
    }
  };
  return bounded(store, "watch", answer, isFunction, ops.subject).then(stopping, (error: unknown) => {
    answer.then((stop) => stopping(stop)(), ignore);
    throw error;
  });
}

const ignore = (): void => {};
