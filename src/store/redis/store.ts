import { ShutdownError } from "../../errors/index.js";
import type * as calls from "../contract/calls.js";
import { GroupedStore, type Kind } from "../contract/grouped.js";
import type { AcquireReply, Inspection, LockStats, SemaphoreCounts, Store, WaiterRefresh } from "../contract/types.js";
import { type ScriptClient, scriptClient } from "./clients.js";
import { Coalescer } from "./coalesce.js";
import { FastPaths } from "./fast.js";
import {
  acquireReply,
  type FastAcquireAnswer,
  fastAcquireReply,
  flag,
  heldArgument,
  inspection,
  joinedReplies,
  refreshed,
  releasedReplies,
} from "./replies.js";
import { runScript, type Script, type Scripts, unexpected } from "./scripts.js";
import type { RedisClient } from "./types.js";
import { Announcements } from "./watch.js";

/**
 * The keys of a semaphore (see lua/lib/holders.lua and queue.lua), all in its hash slot: the
 * holders set, the meta hash (waiters' weights and limits, the id's limit, the turn served), the
 * queue, the waiter lease ends, the tenants' permits and the tenants' turns. The fast paths
 * declare the first (and the tenants' permits when a caller has a tenant).
 */
const semaphoreKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`];
const lockKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`];
/** A fast acquire's fields as they are when the call is made (see `acquire`). */
const snapshotAcquire = ({
  storeKey,
  token,
  limit,
  weight,
  leaseMs,
  tenant,
}: calls.SemaphoreAcquireCall): calls.SemaphoreAcquireCall => ({
  storeKey,
  token,
  limit,
  weight,
  leaseMs,
  tenant: tenant === undefined ? undefined : { ...tenant },
});
const isOne = (reply: number | undefined): boolean => reply === 1;
/**
 * Full releases on one id gathered into one script call while this many are out (as the fast
 * paths' coalescing, ./fast.ts), and at most this many in one. On a contended id, bodies that
 * started in one turn end in one, and their releases reached the server together anyway, each
 * paying the script call, the clock, the marker read and settle; the server answered none before
 * the last had run. One call runs them one after another and settles once.
 */
const RELEASES_FROM = 2;
const MAX_RELEASES = 16;
/**
 * Gathered until the end of the event loop's turn, not of the microtasks: the releases of bodies
 * that end together come from one timer callback each, and Node drains the microtasks after each.
 * Only on an id where two full releases are already out: a lone release goes at once.
 */
const gatherReleases = (flush: () => void): void => void setImmediate(flush);
/**
 * Full acquires on one id gathered into one call (lua/semaphore-acquire.lua takes several) while
 * this many are out, until the end of the microtasks: on a contended id, the callers whose
 * releases one reply answered join again together, and their joins were the larger half of a
 * hand-off's server work once the releases were gathered.
 */
const JOINS_FROM = 1;
const keysOf = (kind: Kind, key: string): string[] => (kind === "semaphore" ? semaphoreKeys(key) : lockKeys(key));

/** The Store over Redis: the fast paths in ./fast.ts, the full scripts here, grants in ./watch.ts. */
export class RedisLeaseStore extends GroupedStore implements Store {
  readonly kind = "redis";
  // Plain fields, not #private: wrappers made with Object.create(store) must keep working, and
  // every call checks `closed`.
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly scripts: Scripts;
  /** The scripts that only give back, sent even once closed (see `run`). */
  private readonly givesBack: ReadonlySet<Script>;
  /** The client's uniform face, looked up once (scriptClient is one per client). */
  private readonly calls: ScriptClient;
  private readonly fast: FastPaths;
  private readonly announcements: Announcements;
  /** Full releases of one turn on one id, sent as one call (lua/semaphore-release.lua takes several). */
  private readonly releases: Coalescer<calls.SemaphoreReleaseCall, number | string>;
  /** Full acquires of one id issued together (their arguments), sent as one call. */
  private readonly joins: Coalescer<(string | number)[], unknown>;

  constructor(
    readonly client: RedisClient,
    readonly timeoutMs: number,
    readonly waiterLeaseMs: number,
    table: Scripts,
  ) {
    super();
    this.scripts = table;
    this.givesBack = new Set([
      table.semaphoreRelease,
      table.semaphoreReleaseFast,
      table.lockRelease,
      table.semaphoreLeave,
      table.lockLeave,
    ]);
    this.calls = scriptClient(client);
    this.fast = new FastPaths(table, (script, keys, args) => this.run(script, keys, args));
    this.announcements = new Announcements(this.calls, timeoutMs, waiterLeaseMs);
    this.releases = new Coalescer(RELEASES_FROM, (key, leases) => this.#releaseAll(key, leases), MAX_RELEASES, gatherReleases);
    this.joins = new Coalescer(JOINS_FROM, (key, callers) => this.#acquireAll(key, callers), MAX_RELEASES);
    // Bound to the store, as the memory store binds its methods: a wrapper made with
    // Object.create(store) closes the store itself (the groups, closures over it, then refuse every
    // call), and a spread of the store keeps both.
    this.watch = this.watch.bind(this);
    this.close = this.close.bind(this);
  }

  /**
   * Every script call of the store: refused once it is closed, but for those that only give back (a
   * release, a return, a leave). The client is the caller's and still open, and a lease an acquire
   * sent before close() brought must not keep its permit for the whole lease, for every process.
   */
  private run(script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
    if (this.closed && !this.givesBack.has(script)) return Promise.reject(new ShutdownError(this.kind));
    return runScript(this.calls, script, keys, args);
  }

  close(): Promise<void> {
    if (this.closing === undefined) {
      this.closed = true;
      this.closing = this.announcements.close();
    }
    return this.closing;
  }

  // ---- the Store contract's steps, grouped by ../contract/grouped.ts ----

  acquire(kind: Kind, call: calls.SemaphoreAcquireCall | calls.LockAcquireCall): Promise<AcquireReply> {
    if (kind === "lock") {
      const script = this.scripts.lockAcquire;
      const args = [call.token, call.leaseMs, call.queue?.waiterLeaseMs ?? 0, call.queue?.maxQueue ?? 0];
      return this.run(script, lockKeys(call.storeKey), args).then((raw) => acquireReply(raw, script, 3));
    }
    const given = call as calls.SemaphoreAcquireCall;
    if (given.token.includes("@")) this.fast.tenanted(given.storeKey);
    if (given.queue !== undefined || this.fast.contended(given.storeKey)) return this.#fullAcquire(given);
    // A batch is built at the end of the turn, and a fast answer of "waiters here" goes on to the
    // full script after a round trip: both read this copy, not the caller's object, which the
    // caller may reuse or change as soon as the call returns (the memory store reads it at once too).
    const snapshot = snapshotAcquire(given);
    // Almost every request: one declared key, gathered with the others of the same turn on this id.
    return this.fast.acquires.call(snapshot.storeKey, snapshot, this.#fastAcquired);
  }

  /** A fast acquire's answer as the Store says it, or the full acquire when the id has waiters. */
  readonly #fastAcquired = (answer: FastAcquireAnswer, call: calls.SemaphoreAcquireCall): AcquireReply | Promise<AcquireReply> =>
    answer === undefined ? this.#fullAcquire(call) : fastAcquireReply(answer);

  /** A fast release's answer, or the full release when the id has waiters. */
  readonly #fastReleased = (returned: number | undefined, lease: calls.SemaphoreReleaseCall): boolean | Promise<boolean> =>
    returned === undefined ? this.#fullRelease(lease) : returned === 1;

  /**
   * The full acquire: waiting, tenants' turns, waiters ahead. Its arguments are taken now (the
   * caller may change its object once the call returns); gathered with the others of the same
   * microtasks on this id while one is out (the joins of callers whose releases one reply answered).
   */
  #fullAcquire(call: calls.SemaphoreAcquireCall): Promise<AcquireReply> {
    const { token, limit, weight, leaseMs, queue, tenant } = call;
    const args = [
      token,
      limit,
      weight,
      leaseMs,
      queue?.waiterLeaseMs ?? 0,
      queue?.maxQueue ?? 0,
      tenant?.limit ?? 0,
      tenant?.maxQueue ?? 0,
    ];
    return this.joins.call(call.storeKey, args, this.#joined);
  }

  /** A caller's part of a full acquire's reply (`{status, ms, marked, fence}`), or its error alone. */
  readonly #joined = (raw: unknown): AcquireReply => {
    const script = this.scripts.semaphoreAcquire;
    if (typeof raw === "string") throw new Error(`${script.name}: ${raw}`);
    return acquireReply(raw, script, 4);
  };

  /** One script call for the full acquires of `key` gathered together; per caller, its reply. */
  #acquireAll(key: string, callers: (string | number)[][]): Promise<unknown[]> {
    const script = this.scripts.semaphoreAcquire;
    const one = callers.length === 1 ? callers[0] : undefined;
    return this.run(script, semaphoreKeys(key), one ?? callers.flat()).then((reply) => {
      if (one !== undefined) {
        this.fast.contention(key, Array.isArray(reply) && reply[2] === 1);
        return [reply];
      }
      const { replies, marked } = joinedReplies(reply, callers.length, script);
      this.fast.contention(key, marked);
      return replies;
    });
  }

  extend(kind: Kind, call: calls.SemaphoreExtendCall): Promise<boolean> {
    if (kind === "semaphore") return this.fast.extends.call(call.storeKey, { ...call }, isOne);
    const script = this.scripts.lockExtend;
    return this.run(script, [call.storeKey], [call.token, call.leaseMs]).then((reply) => flag(reply, script));
  }

  release(kind: Kind, call: calls.SemaphoreReleaseCall): Promise<boolean> {
    if (kind === "lock") return this.#lockRelease(call);
    if (call.weight !== undefined && !this.fast.contended(call.storeKey)) {
      // A copy, as for an acquire: read at the end of the turn, and again after a round trip.
      const lease = { storeKey: call.storeKey, token: call.token, weight: call.weight, heldMs: call.heldMs };
      return this.fast.releases.call(lease.storeKey, lease, this.#fastReleased);
    }
    return this.#fullRelease(call);
  }

  /** The full release: grants the waiters it makes room for. */
  #fullRelease(call: calls.SemaphoreReleaseCall): Promise<boolean> {
    const { storeKey, token, weight, heldMs } = call;
    // A copy, as for a fast release: the batch is built at the end of the turn.
    return this.releases.call(storeKey, { storeKey, token, weight, heldMs }, this.#released);
  }

  /** A lease's part of a full release's reply: live or not, or the error of its release alone. */
  readonly #released = (live: number | string): boolean => {
    if (typeof live === "string") throw new Error(`${this.scripts.semaphoreRelease.name}: ${live}`);
    return live === 1;
  };

  /** One script call for the full releases of a turn on `key`; per lease, a live flag or its error. */
  #releaseAll(key: string, leases: calls.SemaphoreReleaseCall[]): Promise<(number | string)[]> {
    const script = this.scripts.semaphoreRelease;
    const args: (string | number)[] = [];
    for (const lease of leases) args.push(lease.token, lease.weight ?? 0, heldArgument(lease.heldMs));
    return this.run(script, semaphoreKeys(key), args).then((reply) => {
      const { live, marked, announced } = releasedReplies(reply, leases.length, script);
      this.fast.contention(key, marked);
      for (const announcement of announced) this.announcements.announced(key, announcement);
      return live;
    });
  }

  async #lockRelease({ storeKey: key, token, heldMs }: calls.LockReleaseCall): Promise<boolean> {
    const script = this.scripts.lockRelease;
    const reply = await this.run(script, lockKeys(key), [token, heldArgument(heldMs)]);
    // With the announcement of the waiter it granted, if any.
    if (Array.isArray(reply) && reply.length === 2 && typeof reply[1] === "string") {
      this.announcements.announced(key, reply[1]);
      return flag(reply[0], script);
    }
    return flag(reply, script);
  }

  async count({ storeKey: key }: calls.KeyCall): Promise<number> {
    const reply = await this.run(this.scripts.semaphoreCount, [key], []);
    if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0) return reply;
    throw unexpected(reply, this.scripts.semaphoreCount);
  }

  async semaphoreCounts({ storeKey: key, tenant }: calls.SemaphoreStatsCall): Promise<SemaphoreCounts> {
    const script = this.scripts.semaphoreStats;
    const reply = await this.run(script, semaphoreKeys(key), tenant === undefined ? [] : [tenant]);
    const length = tenant === undefined ? 4 : 3;
    if (Array.isArray(reply) && reply.length === length && reply.every((n) => Number.isInteger(n) && n >= 0)) {
      const [used, holders, waiting, tenants] = reply as number[];
      return {
        used: used as number,
        holders: holders as number,
        waiting: waiting as number,
        ...(tenants === undefined ? {} : { tenants }),
      };
    }
    throw unexpected(reply, script);
  }

  async lockStatus({ storeKey: key }: calls.KeyCall): Promise<LockStats> {
    const script = this.scripts.lockStats;
    const reply = await this.run(script, [key], []);
    if (Array.isArray(reply) && reply.length === 2 && (reply[0] === 0 || reply[0] === 1) && Number.isInteger(reply[1])) {
      return { held: reply[0] === 1, expiresInMs: reply[1] as number };
    }
    throw unexpected(reply, script);
  }

  async inspect(kind: Kind, { storeKey: key }: calls.KeyCall): Promise<Inspection> {
    const script = kind === "semaphore" ? this.scripts.semaphoreInspect : this.scripts.lockInspect;
    return inspection(await this.run(script, keysOf(kind, key), []), script);
  }

  async leave(kind: Kind, { storeKey: key, token }: calls.TokenCall): Promise<void> {
    await this.run(kind === "semaphore" ? this.scripts.semaphoreLeave : this.scripts.lockLeave, keysOf(kind, key), [token]);
  }

  async refreshWaiters(kind: Kind, { storeKey: key, tokens, waiterLeaseMs }: calls.RefreshWaitersCall): Promise<WaiterRefresh> {
    const script = kind === "semaphore" ? this.scripts.semaphoreRefreshWaiters : this.scripts.lockRefreshWaiters;
    return refreshed(await this.run(script, keysOf(kind, key), [waiterLeaseMs, ...tokens]), tokens.length, script);
  }

  /**
   * One subscriber connection per store, shared by every waiter of this
   * process; a channel is subscribed while a local waiter needs it, and the
   * connection is closed a second after the last one leaves.
   */
  async watch({ storeKey: key, onGrant }: calls.WatchCall): Promise<() => void> {
    if (this.closed) throw new ShutdownError(this.kind);
    return this.announcements.watch(key, onGrant);
  }
}
