import type { Acquired, Refused } from "../acquire/types.js";
import type { WaitingCalls } from "../acquire/waiting-calls.js";
import type { LeaseholdError, LeaseLostError } from "../errors/index.js";
import type { LossReason } from "../errors/lease-lost.js";
import { subjectOf } from "../observability/events.js";
import type { Subject } from "../observability/types.js";
import type { CallSettings } from "../options/settings.js";
import type { QueueOptions, TenantOptions } from "../store/contract/calls.js";
import type { AcquireReply, Answer, Store, WaiterRefresh } from "../store/contract/types.js";
import type { TokenTag } from "./token.js";

/** A tenant and its share of an id, as one semaphore call asks for them. */
export interface Tenant extends TenantOptions {
  name: string;
}

/**
 * One `acquire` or `run` call of a semaphore or a lock, checked before any
 * slot is taken, then the store calls of its acquisition and of its lease.
 * What a semaphore and a lock do differently is said by their subclass
 * (semaphore/call.ts, lock/call.ts); every step they share (acquire.ts,
 * leasing.ts, handle.ts) takes this. One object with methods rather
 * than a closure per step: a request makes one of these. `L`: the lease handle it makes.
 */
export abstract class LeaseCall<L = unknown> implements WaitingCalls {
  /** Set once acquired: the store the lease lives in. */
  store!: Store;
  readonly leaseMs: number;
  /** What each acquisition asks for (a lock: 1 of 1). */
  abstract readonly limit: number;
  abstract readonly weight: number;
  #subject: Subject | undefined;

  constructor(
    readonly kind: "semaphore" | "lock",
    readonly id: string,
    /** The id's store key (`{prefix:kind:id}`). */
    readonly storeKey: string,
    readonly settings: CallSettings,
    /** What the token carries after its random part and acquire time: owner (and limit), see `ownerTag`. */
    readonly tag: TokenTag,
    /** The caller's tenant and its share (a semaphore call that passed one). */
    readonly tenant?: Tenant,
  ) {
    this.leaseMs = settings.leaseMs;
  }

  /** Who is acquiring, for events: made on first use. */
  get subject(): Subject {
    this.#subject ??= subjectOf(this.kind, this.id, this.tenant?.name);
    return this.#subject;
  }

  /** A semaphore's limit and weight, for events; a lock has none. */
  get permits(): { limit: number; weight: number } | undefined {
    return undefined;
  }

  /** One attempt: take the lease, or join the queue with `queue`. */
  abstract take(store: Store, token: string, queue?: QueueOptions, madeAt?: number): Answer<AcquireReply>;
  /** Leave the queue and return anything held. */
  abstract leave(store: Store, token: string): Answer<void>;
  abstract refresh(store: Store, tokens: readonly string[], waiterLeaseMs: number): Answer<WaiterRefresh>;
  /** `record`: the acquire's `AcquireReply.record`, if any (see `LeaseRecord`). */
  abstract extend(token: string, ms: number, record?: object): Answer<boolean>;
  /** `record`: as for `extend`; `sentAt`: the caller's clock reading of just now. */
  abstract release(token: string, heldMs: number | undefined, record?: object, sentAt?: number): Answer<boolean>;
  /** The error that names the loss of this call's lease, and why it was lost. */
  abstract lost(reason: LossReason): LeaseLostError;
  /** The error `run` rejects with when no lease was had. */
  abstract notAcquired(refused: Refused): LeaseholdError;
  /** The lease handle of what was had. */
  abstract lease(had: Acquired): L;
}
