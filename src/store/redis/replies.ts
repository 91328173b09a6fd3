// The scripts' replies, checked and turned into what the Store interface answers. A reply of the
// wrong shape throws `unexpected` (the engine turns it into StoreUnavailableError).
import type { AcquireReply, Inspection, WaiterRefresh, WaiterStatus } from "../contract/types.js";
import { type Script, unexpected } from "./scripts.js";

const STATUS_REPLIES = [0, 1, 2, 3, 4];

/** A fence as the scripts send it: a positive safe integer. */
const isFence = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n > 0;

/** The id's typical hold as the scripts send it (lua/lib/hold-read.lua): whole ms, 0 for none. */
const isHold = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0;

/**
 * `{status, ms, fence}` from a lock; `{status, ms, marked, fence}` from a
 * semaphore (marked: whether the id keeps waiters). The last is the fence when
 * status is 1, else the id's typical hold (0: none).
 */
export function acquireReply(reply: unknown, script: Script, length: 3 | 4): AcquireReply {
  if (
    Array.isArray(reply) &&
    reply.length === length &&
    STATUS_REPLIES.includes(reply[0]) &&
    typeof reply[1] === "number" &&
    (reply[0] === 1 ? isFence(reply[length - 1]) : isHold(reply[length - 1]))
  ) {
    const [status, retryAfterMs] = reply as [number, number];
    const last = reply[length - 1] as number;
    if (status === 1) return { acquired: true, retryAfterMs: 0, fence: last };
    return {
      acquired: false,
      retryAfterMs,
      ...(status === 2 ? { queued: true } : {}),
      ...(status === 3 ? { queueFull: true } : {}),
      ...(status === 4 ? { tenantFull: true } : {}),
      ...(last > 0 ? { holdMs: last } : {}),
    };
  }
  throw unexpected(reply, script);
}

export function flag(reply: unknown, script: Script): boolean {
  if (reply === 0 || reply === 1) return reply === 1;
  throw unexpected(reply, script);
}

/**
 * A fast path's reply for `count` items: `{-1}` (the id has waiters: take the
 * full path) becomes `undefined` for each; otherwise one 0 or 1 per item.
 */
export function flagsPerItem(reply: unknown, count: number, script: Script): (number | undefined)[] {
  // One lease of weight 1 is answered with its number alone (lua/semaphore-release-fast.lua).
  if (count === 1 && (reply === 0 || reply === 1)) return [reply];
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === -1) return new Array(count).fill(undefined);
    if (reply.length === count && reply.every((n) => n === 0 || n === 1)) return reply as number[];
  }
  throw unexpected(reply, script);
}

/**
 * A full release's reply for `count` leases (lua/semaphore-release.lua): per lease 1 or 0 (live),
 * or "ERR <message>" when that lease's release failed; then whether the id keeps waiters (0 or 1),
 * then the announcement of each release that granted.
 */
export function releasedReplies(
  reply: unknown,
  count: number,
  script: Script,
): { live: (number | string)[]; marked: boolean; announced: string[] } {
  if (Array.isArray(reply) && reply.length > count && (reply[count] === 0 || reply[count] === 1)) {
    let valid = true;
    for (let i = 0; i < count; i++) {
      const live = reply[i];
      if (live !== 0 && live !== 1 && !(typeof live === "string" && live.startsWith("ERR "))) valid = false;
    }
    for (let i = count + 1; i < reply.length; i++) if (typeof reply[i] !== "string") valid = false;
    if (valid) return { live: reply.slice(0, count), marked: reply[count] === 1, announced: reply.slice(count + 1) };
  }
  throw unexpected(reply, script);
}

/**
 * A full acquire's reply for `count` callers (lua/semaphore-acquire.lua): per caller `{status, ms,
 * fence or hold}`, or `{"ERR <message>", 0, 0}` when that caller's step failed; then whether the id
 * keeps waiters. Answers each caller's part in the form of one caller's reply (`{status, ms,
 * marked, fence}`, see acquireReply) or its error's text.
 */
export function joinedReplies(reply: unknown, count: number, script: Script): { replies: unknown[]; marked: boolean } {
  if (Array.isArray(reply) && reply.length === count * 3 + 1 && (reply[count * 3] === 0 || reply[count * 3] === 1)) {
    const marked = reply[count * 3] as number;
    const replies: unknown[] = [];
    for (let i = 0; i < count * 3; i += 3) {
      const status = reply[i];
      if (typeof status === "string" && status.startsWith("ERR ")) replies.push(status);
      else replies.push([status, reply[i + 1], marked, reply[i + 2]]);
    }
    return { replies, marked: marked === 1 };
  }
  throw unexpected(reply, script);
}

/**
 * A fast acquire's answer per call: 0 and the fence when held; positive ms (refused)
 * or negative ms (refused for the tenant's cap) and the id's typical hold (0:
 * none). Undefined: take the full path.
 */
export type FastAcquireAnswer = { refusedFor: number; fenceOrHold: number } | undefined;

export function fastAcquireAnswers(reply: unknown, count: number, script: Script): FastAcquireAnswer[] {
  // One call of weight 1 that holds is answered with its fence alone (lua/semaphore-acquire-fast.lua).
  if (count === 1 && isFence(reply)) return [{ refusedFor: 0, fenceOrHold: reply }];
  if (Array.isArray(reply)) {
    if (reply.length === 1 && reply[0] === -1) return new Array(count).fill(undefined);
    if (reply.length === count * 2) {
      const answers: FastAcquireAnswer[] = [];
      for (let i = 0; i < reply.length; i += 2) {
        const refusedFor = reply[i];
        const fenceOrHold = reply[i + 1];
        const valid = Number.isSafeInteger(refusedFor) && (refusedFor === 0 ? isFence(fenceOrHold) : isHold(fenceOrHold));
        if (!valid) throw unexpected(reply, script);
        answers.push({ refusedFor, fenceOrHold });
      }
      return answers;
    }
  }
  throw unexpected(reply, script);
}

/** A fast acquire's answer as the Store interface says it. */
export function fastAcquireReply(answer: NonNullable<FastAcquireAnswer>): AcquireReply {
  const { refusedFor, fenceOrHold } = answer;
  if (refusedFor === 0) return { acquired: true, retryAfterMs: 0, fence: fenceOrHold };
  const hold = fenceOrHold > 0 ? { holdMs: fenceOrHold } : {};
  if (refusedFor > 0) return { acquired: false, retryAfterMs: refusedFor, ...hold };
  return { acquired: false, tenantFull: true, retryAfterMs: -refusedFor, ...hold };
}

/** A release's hold as the scripts take it: whole ms, or -1 when not known (lua/lib/hold.lua). */
export const heldArgument = (heldMs: number | undefined): number =>
  heldMs === undefined || !(heldMs >= 0) ? -1 : Math.round(heldMs);

const WAITER_STATUS: Record<number, WaiterStatus> = { 0: "gone", 1: "held", 2: "waiting" };

/** A status and a fence (0 unless held) per token, then the ms until the nearest lease ends. */
export function refreshed(reply: unknown, count: number, script: Script): WaiterRefresh {
  if (Array.isArray(reply) && reply.length === count * 2 + 1 && typeof reply[count * 2] === "number") {
    const statuses: WaiterStatus[] = [];
    const fences: number[] = [];
    for (let i = 0; i < count * 2; i += 2) {
      const status = WAITER_STATUS[reply[i]];
      const fence = reply[i + 1];
      if (status === undefined || !(status === "held" ? isFence(fence) : fence === 0)) throw unexpected(reply, script);
      statuses.push(status);
      fences.push(fence);
    }
    return { statuses, fences, retryAfterMs: reply[count * 2] };
  }
  throw unexpected(reply, script);
}

/** Two flat lists of (token, weight, ms left): holders, then waiters in queue order. */
export function inspection(reply: unknown, script: Script): Inspection {
  const entries = (list: unknown): Inspection["holders"] | undefined => {
    if (!Array.isArray(list) || list.length % 3 !== 0) return undefined;
    const out: Inspection["holders"] = [];
    for (let i = 0; i < list.length; i += 3) {
      const [token, weight, expiresInMs] = [list[i], list[i + 1], list[i + 2]];
      if (typeof token !== "string" || typeof weight !== "number" || typeof expiresInMs !== "number") return undefined;
      out.push({ token, weight, expiresInMs });
    }
    return out;
  };
  if (Array.isArray(reply) && reply.length === 2) {
    const holders = entries(reply[0]);
    const waiters = entries(reply[1]);
    if (holders !== undefined && waiters !== undefined) return { holders, waiters };
  }
  throw unexpected(reply, script);
}
