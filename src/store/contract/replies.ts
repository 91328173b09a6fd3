// What each store call must answer, checked before the engine reads it: a custom store (or a
// garbled reply) that answers anything else is a store failure (see store/access/bounded.ts), never a crash.

import { MAX_MS } from "../../options/validate.js";
import type { Grant } from "./calls.js";
import type {
  AcquireReply,
  InspectedEntry,
  Inspection,
  LockStats,
  SemaphoreCounts,
  WaiterRefresh,
  WaiterStatus,
} from "./types.js";

export const isFlag = (reply: unknown): boolean => typeof reply === "boolean";

export const isCount = (reply: unknown): boolean => typeof reply === "number" && Number.isSafeInteger(reply) && reply >= 0;

const isWhole = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value >= 0;

export const isCounts = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  isWhole((reply as SemaphoreCounts).used) &&
  isWhole((reply as SemaphoreCounts).holders) &&
  isWhole((reply as SemaphoreCounts).waiting);

export const isLockStats = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  typeof (reply as LockStats).held === "boolean" &&
  isWhole((reply as LockStats).expiresInMs);

const isEntry = (entry: unknown): boolean =>
  typeof entry === "object" &&
  entry !== null &&
  typeof (entry as InspectedEntry).token === "string" &&
  isWhole((entry as InspectedEntry).weight) &&
  typeof (entry as InspectedEntry).expiresInMs === "number" &&
  Number.isFinite((entry as InspectedEntry).expiresInMs);

/** Who holds and who waits: two lists of entries. */
export const isInspection = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  Array.isArray((reply as Inspection).holders) &&
  (reply as Inspection).holders.every(isEntry) &&
  Array.isArray((reply as Inspection).waiters) &&
  (reply as Inspection).waiters.every(isEntry);

/** A fence: a positive safe integer. */
const isFence = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value > 0;

export const isAcquireReply = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  typeof (reply as AcquireReply).acquired === "boolean" &&
  typeof (reply as AcquireReply).retryAfterMs === "number" &&
  Number.isFinite((reply as AcquireReply).retryAfterMs) &&
  (reply as AcquireReply).retryAfterMs >= 0 &&
  // A lease without its fence could not be fenced: a store that gives none is answering nonsense.
  (!(reply as AcquireReply).acquired || isFence((reply as AcquireReply).fence)) &&
  // A typical hold, when the store keeps one, is a duration like any other.
  ((reply as AcquireReply).holdMs === undefined || isDelay((reply as AcquireReply).holdMs));

/** A delay a timer can hold: no lease, and so no wait the store reports, is longer. */
function isDelay(value: unknown): boolean {
  return typeof value === "number" && value >= 0 && value <= MAX_MS;
}

const WAITER_STATUSES: readonly unknown[] = ["held", "waiting", "gone"] satisfies WaiterStatus[];

/** A refresh of `count` waiters: one known status per token, and a delay. */
export const isWaiterRefresh =
  (count: number) =>
  (reply: unknown): boolean =>
    typeof reply === "object" &&
    reply !== null &&
    Array.isArray((reply as WaiterRefresh).statuses) &&
    (reply as WaiterRefresh).statuses.length === count &&
    (reply as WaiterRefresh).statuses.every((status) => WAITER_STATUSES.includes(status)) &&
    Array.isArray((reply as WaiterRefresh).fences) &&
    (reply as WaiterRefresh).statuses.every((status, i) => status !== "held" || isFence((reply as WaiterRefresh).fences[i])) &&
    isDelay((reply as WaiterRefresh).retryAfterMs);

/** An announcement of waiters granted permits. */
export const isGrant = (reply: unknown): boolean =>
  typeof reply === "object" &&
  reply !== null &&
  Array.isArray((reply as Grant).tokens) &&
  (reply as Grant).tokens.every((token) => typeof token === "string") &&
  Array.isArray((reply as Grant).fences) &&
  (reply as Grant).fences.length === (reply as Grant).tokens.length &&
  (reply as Grant).fences.every(isFence) &&
  isDelay((reply as Grant).waiterLeaseMs);

/** What `watch` resolves: the function that stops watching. */
export const isFunction = (reply: unknown): boolean => typeof reply === "function";
