// The fast paths of a semaphore (lua/semaphore-acquire-fast.lua, semaphore-release-fast.lua, semaphore-extend.lua):
// almost every request makes these calls. One declared key (two when tenants hold), and the calls
// of one turn on one id gathered into one script call (coalesce.ts).

import type { SemaphoreAcquireCall, SemaphoreExtendCall, SemaphoreReleaseCall } from "../contract/calls.js";
import { Coalescer } from "./coalesce.js";
import { type FastAcquireAnswer, fastAcquireAnswers, flagsPerItem, heldArgument } from "./replies.js";
import type { Script, Scripts } from "./scripts.js";

/** In-flight calls of one kind on one id from which further calls are gathered into one. */
const COALESCE_FROM = 2;
/**
 * Items at which a gathered call goes at once rather than at the end of the turn (measured at
 * concurrency 64: 8 to 32 alike, 4 too few): the server starts on a full batch while this process
 * makes the next.
 */
const MAX_BATCH = 16;
/** Ids remembered as having waiters (or tenants); past this, forgetting costs one round trip. */
const REMEMBERED_IDS = 10_000;

/** A fast path's keys: the holders, and the tenants' permits when one of the tokens has a tenant. */
const fastKeys = (key: string, tenanted: boolean): string[] => (tenanted ? [key, `${key}:t`] : [key]);

/**
 * Whether a fast call must declare the tenants' index: the id is remembered as having tenants, or
 * one of its tokens has one (the memory of ids is bounded and starts over: a tenant lease released
 * without the index would leave its tenant counting permits nobody holds).
 */
const withTenant = (items: readonly { token: string }[]): boolean => {
  for (const item of items) if (item.token.includes("@")) return true;
  return false;
};

/**
 * semaphore-acquire-fast.lua's arguments: five per call (token, limit, lease, weight, tenant cap), or three
 * for one call of weight 1 without a cap, which the script answers with its fence alone.
 */
function fastAcquireArguments(calls: readonly SemaphoreAcquireCall[]): (string | number)[] {
  const one = calls[0];
  if (calls.length === 1 && one !== undefined && one.weight === 1 && !(one.tenant?.limit ?? 0)) {
    return [one.token, one.limit, one.leaseMs];
  }
  const args: (string | number)[] = [];
  for (const call of calls) args.push(call.token, call.limit, call.leaseMs, call.weight, call.tenant?.limit ?? 0);
  return args;
}

/**
 * semaphore-release-fast.lua's arguments: three per lease (token, weight, ms held or -1), or for one lease
 * of weight 1 its token, and the ms it was held when known; the script answers it with a number.
 */
function fastReleaseArguments(leases: readonly SemaphoreReleaseCall[]): (string | number)[] {
  const one = leases[0];
  if (leases.length === 1 && one !== undefined && one.weight === 1) {
    const held = heldArgument(one.heldMs);
    return held < 0 ? [one.token] : [one.token, held];
  }
  const args: (string | number)[] = [];
  // Weight 0: not known, the script counts the lease's permits itself.
  for (const lease of leases) args.push(lease.token, lease.weight ?? 0, heldArgument(lease.heldMs));
  return args;
}

type Run = (script: Script, keys: string[], args: (string | number)[]) => Promise<unknown>;

/** Adds to a bounded set of ids: past its bound it starts over (forgetting costs a round trip, never a wrong path). */
function remember(ids: Set<string>, key: string): void {
  if (ids.size >= REMEMBERED_IDS) ids.clear();
  ids.add(key);
}

export class FastPaths {
  /**
   * Ids whose fast path last answered "waiters here": their fail-fast acquires
   * and releases go straight to the full script rather than trying the fast one
   * first. Only a hint: the fast scripts check for waiters themselves.
   */
  readonly #contended = new Set<string>();
  /**
   * Ids with tenants (this process acquired for one, or a fast path said so): their fast calls
   * declare the tenants' index too, so that any of them can prune a tenant's lapsed permits.
   */
  readonly #tenanted = new Set<string>();
  // One group per id: the calls of one turn go out in the order they were made. The items are read
  // when the script call is built, at the end of the turn: the store passes copies, never the
  // caller's own objects (which a caller may reuse as soon as its call returns).
  readonly acquires: Coalescer<SemaphoreAcquireCall, FastAcquireAnswer>;
  readonly releases: Coalescer<SemaphoreReleaseCall, number | undefined>;
  readonly extends: Coalescer<SemaphoreExtendCall, number | undefined>;

  constructor(scripts: Scripts, run: Run) {
    this.acquires = new Coalescer(
      COALESCE_FROM,
      (key, calls) => {
        const script = scripts.semaphoreAcquireFast;
        const args = fastAcquireArguments(calls);
        return run(script, fastKeys(key, this.#tenanted.has(key) || withTenant(calls)), args).then((reply) => {
          const replies = fastAcquireAnswers(reply, calls.length, script);
          this.contention(key, replies[0] === undefined);
          return replies;
        });
      },
      MAX_BATCH,
    );
    this.releases = new Coalescer(
      COALESCE_FROM,
      (key, leases) => {
        const script = scripts.semaphoreReleaseFast;
        const args = fastReleaseArguments(leases);
        return run(script, fastKeys(key, this.#tenanted.has(key) || withTenant(leases)), args).then((reply) => {
          const replies = flagsPerItem(reply, leases.length, script);
          this.contention(key, replies[0] === undefined);
          return replies;
        });
      },
      MAX_BATCH,
    );
    this.extends = new Coalescer(
      COALESCE_FROM,
      (key, renewals) => {
        const script = scripts.semaphoreExtend;
        const args: (string | number)[] = [];
        for (const renewal of renewals) args.push(renewal.token, renewal.leaseMs, renewal.weight ?? 0);
        return run(script, [key], args).then((reply) => flagsPerItem(reply, renewals.length, script));
      },
      MAX_BATCH,
    );
  }

  /** Whether the id is known to have waiters: its calls take the full scripts at once. */
  contended(key: string): boolean {
    return this.#contended.has(key);
  }

  /** What a script said of the id's waiters. */
  contention(key: string, contended: boolean): void {
    if (contended) remember(this.#contended, key);
    else this.#contended.delete(key);
  }

  /** The id has tenants: its fast calls declare their index. */
  tenanted(key: string): void {
    remember(this.#tenanted, key);
  }
}
