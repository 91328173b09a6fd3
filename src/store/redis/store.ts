import { ShutdownError } from "../../errors.js";
import { type RedisClient, type ScriptClient, scriptClient } from "../clients.js";
import type {
  AcquireReply,
  Grant,
  Inspection,
  LockStats,
  QueueOptions,
  SemaphoreFigures,
  Store,
  TenantOptions,
  WaiterRefresh,
} from "../types.js";
import { FastPaths } from "./fast.js";
import { acquireReply, flag, heldArgument, inspection, refreshed, takeReply } from "./replies.js";
import { runScript, type Script, type Scripts, unexpected } from "./scripts.js";
import { Announcements } from "./watch.js";

/**
 * The keys of a semaphore (see lua/lib/holders.lua and queue.lua), all in its hash slot: the
 * holders set, the meta hash (waiters' weights and limits, the id's limit, the turn served), the
 * queue, the waiter lease ends, the tenants' permits and the tenants' turns. The fast paths
 * declare the first (and the tenants' permits when a caller has a tenant).
 */
const semaphoreKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`, `${key}:t`, `${key}:qt`];
const lockKeys = (key: string): string[] => [key, `${key}:m`, `${key}:q`, `${key}:qe`];

/** The Store over Redis: the fast paths in ./fast.ts, the full scripts here, grants in ./watch.ts. */
export class RedisLeaseStore implements Store {
  readonly kind = "redis";
  // Plain fields, not #private: wrappers made with Object.create(store) must keep working, and
  // every call checks `closed`.
  private closed = false;
  private closing: Promise<void> | undefined;
  private readonly scripts: Scripts;
  /** The client's uniform face, looked up once (scriptClient is one per client). */
  private readonly calls: ScriptClient;
  private readonly fast: FastPaths;
  private readonly announcements: Announcements;

  constructor(
    readonly client: RedisClient,
    readonly timeoutMs: number,
    readonly waiterLeaseMs: number,
    table: Scripts,
  ) {
    this.scripts = table;
    this.calls = scriptClient(client);
    this.fast = new FastPaths(table, (script, keys, args) => this.run(script, keys, args));
    this.announcements = new Announcements(this.calls, timeoutMs, waiterLeaseMs);
  }

  /** Every script call of the store: refused once it is closed. */
  private run(script: Script, keys: string[], args: (string | number)[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new ShutdownError(this.kind));
    return runScript(this.calls, script, keys, args);
  }

  close(): Promise<void> {
    if (this.closing === undefined) {
      this.closed = true;
      this.closing = this.announcements.close();
    }
    return this.closing;
  }

  semaphoreAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply> {
    if (token.includes("@")) this.fast.tenanted(key);
    if (queue === undefined && !this.fast.contended(key)) {
      // Almost every request: one declared key, gathered with the others of the same turn on this id.
      const take = { token, limit, weight, leaseMs, tenantLimit: tenant?.limit ?? 0 };
      return this.fast.takes
        .call(key, take)
        .then((answer) =>
          answer === undefined ? this.fullAcquire(key, token, limit, weight, leaseMs, queue, tenant) : takeReply(answer),
        );
    }
    return this.fullAcquire(key, token, limit, weight, leaseMs, queue, tenant);
  }

  /** The full acquire: waiting, tenants' turns, waiters ahead. */
  private fullAcquire(
    key: string,
    token: string,
    limit: number,
    weight: number,
    leaseMs: number,
    queue?: QueueOptions,
    tenant?: TenantOptions,
  ): Promise<AcquireReply> {
    const script = this.scripts.semaphoreAcquire;
    const args = [
      token,
      limit,
      weight,
      leaseMs,
      queue?.claimMs ?? 0,
      queue?.maxQueue ?? 0,
      tenant?.limit ?? 0,
      tenant?.maxQueue ?? 0,
    ];
    return this.run(script, semaphoreKeys(key), args).then((raw) => {
      const reply = acquireReply(raw, script, 4);
      this.fast.contention(key, (raw as unknown[])[2] === 1);
      return reply;
    });
  }

  async semaphoreExtend(key: string, token: string, leaseMs: number, weight?: number): Promise<boolean> {
    // Weight 0: not known, the script counts the lease's permits itself.
    const extended = await this.fast.extends.call(key, { token, leaseMs, weight: weight ?? 0 });
    return extended === 1;
  }

  semaphoreRelease(key: string, token: string, weight?: number, heldMs?: number): Promise<boolean> {
    const held = heldArgument(heldMs);
    if (weight !== undefined && !this.fast.contended(key)) {
      return this.fast.returns
        .call(key, { token, weight, heldMs: held })
        .then((returned) => (returned === undefined ? this.fullRelease(key, token, weight, held) : returned === 1));
    }
    return this.fullRelease(key, token, weight, held);
  }

  /** The full release: grants the waiters it makes room for. */
  private async fullRelease(key: string, token: string, weight: number | undefined, held: number): Promise<boolean> {
    const script = this.scripts.semaphoreRelease;
    const reply = await this.run(script, semaphoreKeys(key), [token, weight ?? 0, held]);
    if (Array.isArray(reply) && (reply.length === 2 || reply.length === 3) && (reply[1] === 0 || reply[1] === 1)) {
      this.fast.contention(key, reply[1] === 1);
      if (typeof reply[2] === "string") this.announcements.announced(key, reply[2]);
      return flag(reply[0], script);
    }
    throw unexpected(reply, script);
  }

  async semaphoreCount(key: string): Promise<number> {
    const reply = await this.run(this.scripts.semaphoreCount, [key], []);
    if (typeof reply === "number" && Number.isInteger(reply) && reply >= 0) return reply;
    throw unexpected(reply, this.scripts.semaphoreCount);
  }

  async semaphoreStats(key: string, tenant?: string): Promise<SemaphoreFigures> {
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

  async lockStats(key: string): Promise<LockStats> {
    const script = this.scripts.lockStats;
    const reply = await this.run(script, [key], []);
    if (Array.isArray(reply) && reply.length === 2 && (reply[0] === 0 || reply[0] === 1) && Number.isInteger(reply[1])) {
      return { held: reply[0] === 1, expiresInMs: reply[1] as number };
    }
    throw unexpected(reply, script);
  }

  async semaphoreInspect(key: string): Promise<Inspection> {
    const script = this.scripts.semaphoreInspect;
    return inspection(await this.run(script, semaphoreKeys(key), []), script);
  }

  async lockInspect(key: string): Promise<Inspection> {
    const script = this.scripts.lockInspect;
    return inspection(await this.run(script, lockKeys(key), []), script);
  }

  async semaphoreLeave(key: string, token: string): Promise<void> {
    await this.run(this.scripts.semaphoreLeave, semaphoreKeys(key), [token]);
  }

  async semaphoreRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.semaphoreRefreshWaiters;
    return refreshed(await this.run(script, semaphoreKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  async lockAcquire(key: string, token: string, ttlMs: number, queue?: QueueOptions): Promise<AcquireReply> {
    const script = this.scripts.lockAcquire;
    const args = [token, ttlMs, queue?.claimMs ?? 0, queue?.maxQueue ?? 0];
    return acquireReply(await this.run(script, lockKeys(key), args), script, 3);
  }

  async lockExtend(key: string, token: string, ttlMs: number): Promise<boolean> {
    const script = this.scripts.lockExtend;
    return flag(await this.run(script, [key], [token, ttlMs]), script);
  }

  async lockRelease(key: string, token: string, heldMs?: number): Promise<boolean> {
    const script = this.scripts.lockRelease;
    const reply = await this.run(script, lockKeys(key), [token, heldArgument(heldMs)]);
    // With the announcement of the waiter it granted, if any.
    if (Array.isArray(reply) && reply.length === 2 && typeof reply[1] === "string") {
      this.announcements.announced(key, reply[1]);
      return flag(reply[0], script);
    }
    return flag(reply, script);
  }

  async lockLeave(key: string, token: string): Promise<void> {
    await this.run(this.scripts.lockLeave, lockKeys(key), [token]);
  }

  async lockRefreshWaiters(key: string, tokens: readonly string[], claimMs: number): Promise<WaiterRefresh> {
    const script = this.scripts.lockRefreshWaiters;
    return refreshed(await this.run(script, lockKeys(key), [claimMs, ...tokens]), tokens.length, script);
  }

  /**
   * One subscriber connection per store, shared by every waiter of this
   * process; a channel is subscribed while a local waiter needs it, and the
   * connection is closed a second after the last one leaves.
   */
  async watch(key: string, onGrant: (grant: Grant) => void): Promise<() => void> {
    if (this.closed) throw new ShutdownError(this.kind);
    return this.announcements.watch(key, onGrant);
  }
}
