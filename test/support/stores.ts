import type { Redis } from "ioredis";
import { memoryStore, type RedisClient, redisStore } from "../../src/index.js";
import type { Store } from "../../src/store/index.js";
import { newNodeRedis, newRedis, newValkey } from "./redis.js";

/** One store the conformance suite runs against. */
export interface StoreUnderTest {
  /** `memory`, or the Redis client library the Redis store talks through. */
  name: "memory" | "ioredis" | "iovalkey" | "node-redis" | "node-redis 5";
  /** A store for one test (memory: fresh; Redis: one client per file, keys isolated by prefix). */
  make(options?: { waiterLeaseMs?: number }): Store;
  /** An ioredis client to the same server, for Redis-side assertions (whichever client the store uses). */
  redis?: () => Redis;
}

/** One client of each kind per test file, made on first use. */
function perFile<T>(make: () => T): () => T {
  let client: T | undefined;
  return () => {
    client ??= make();
    return client;
  };
}

const ioredis = perFile(() => newRedis());
const redisOver = (name: StoreUnderTest["name"], client: () => RedisClient): StoreUnderTest => ({
  name,
  make: (options) => redisStore(client(), options),
  redis: ioredis,
});

/**
 * The embedded store, then the Redis store through every client library
 * leasehold accepts: every conformance test runs once against each. The
 * current node-redis client is passed unconnected (leasehold connects it on
 * first use), node-redis 5 connected, as users do either.
 */
export const storesUnderTest: StoreUnderTest[] = [
  { name: "memory", make: (options) => memoryStore(options) },
  redisOver("ioredis", ioredis),
  redisOver(
    "node-redis",
    perFile(() => newNodeRedis(6, { connect: false })),
  ),
  redisOver(
    "node-redis 5",
    perFile(() => newNodeRedis(5)),
  ),
  redisOver(
    "iovalkey",
    perFile(() => newValkey()),
  ),
];

/** A store call, as spyStore counts and faults it: the group and the call (`semaphoreAcquire`: `semaphore.acquire`). */
type Method =
  | `semaphore${"Acquire" | "Extend" | "Release" | "Count" | "Stats" | "Inspect" | "Leave" | "RefreshWaiters"}`
  | `lock${"Acquire" | "Extend" | "Release" | "Stats" | "Inspect" | "Leave" | "RefreshWaiters"}`
  | "watch";

/**
 * An acquire's call as a store of another process receives it: without the in-process waiter
 * (`QueueOptions.waiter`), which only a store in the caller's process can serve. A spy store stands
 * for such a store, so that a wait on it goes through the waiting room (announce, watch, claim),
 * whatever store it wraps.
 */
function remote<C>(call: C): C {
  const queue = (call as { queue?: { waiter?: unknown } } | undefined)?.queue;
  if (queue?.waiter === undefined) return call;
  const { waiter: _, ...rest } = queue;
  return { ...call, queue: rest };
}

/** What a spy store does instead of the real call, for one call number of one method. */
export type Fault = "throw" | "hang" | undefined;

/**
 * Wraps a real store: counts calls per method and can fail chosen calls
 * (`faults.semaphoreExtend = (n) => n === 1 ? "throw" : undefined`). Not a mock: every
 * call that is not faulted reaches the real store.
 */
export function spyStore(inner: Store, faults: Partial<Record<Method, (n: number) => Fault>> = {}, timeoutMs = 500) {
  const calls: Record<Method, number> = {
    semaphoreAcquire: 0,
    semaphoreExtend: 0,
    semaphoreRelease: 0,
    semaphoreCount: 0,
    semaphoreLeave: 0,
    semaphoreRefreshWaiters: 0,
    semaphoreStats: 0,
    semaphoreInspect: 0,
    lockStats: 0,
    lockInspect: 0,
    lockAcquire: 0,
    lockExtend: 0,
    lockRelease: 0,
    lockLeave: 0,
    lockRefreshWaiters: 0,
    watch: 0,
  };
  const wrap =
    <C, R>(method: Method, real: (call: C) => R | Promise<R>) =>
    async (call: C): Promise<R> => {
      calls[method] += 1;
      const fault = faults[method]?.(calls[method]);
      // A round trip that failed on the way: a reset connection, as the clients report one.
      if (fault === "throw")
        throw Object.assign(new Error(`injected failure of ${method} #${calls[method]}`), { code: "ECONNRESET" });
      if (fault === "hang") return new Promise<R>(() => {});
      return real(remote(call));
    };
  const { semaphore, lock } = inner;
  const store: Store = {
    kind: `spy(${inner.kind})`,
    timeoutMs,
    ...(inner.waiterLeaseMs === undefined ? {} : { waiterLeaseMs: inner.waiterLeaseMs }),
    semaphore: {
      acquire: wrap("semaphoreAcquire", semaphore.acquire),
      extend: wrap("semaphoreExtend", semaphore.extend),
      release: wrap("semaphoreRelease", semaphore.release),
      count: wrap("semaphoreCount", semaphore.count),
      stats: wrap("semaphoreStats", semaphore.stats),
      inspect: wrap("semaphoreInspect", semaphore.inspect),
      leave: wrap("semaphoreLeave", semaphore.leave),
      refreshWaiters: wrap("semaphoreRefreshWaiters", semaphore.refreshWaiters),
    },
    lock: {
      acquire: wrap("lockAcquire", lock.acquire),
      extend: wrap("lockExtend", lock.extend),
      release: wrap("lockRelease", lock.release),
      stats: wrap("lockStats", lock.stats),
      inspect: wrap("lockInspect", lock.inspect),
      leave: wrap("lockLeave", lock.leave),
      refreshWaiters: wrap("lockRefreshWaiters", lock.refreshWaiters),
    },
    watch: wrap("watch", (call: Parameters<Store["watch"]>[0]) => inner.watch(call)),
    close: () => inner.close?.() ?? Promise.resolve(),
  };
  return { store, calls };
}

/** One store call as {@link mapCalls} hands it over: any call object in, its answer out. */
export type AnyCall = (call: never) => unknown;

/**
 * A store whose every call (`semaphore.acquire`, ..., `lock.refreshWaiters`, `watch`) is
 * `around(name, real)`, each real call bound to `inner`: a custom store over a real one, as a user
 * may write (latency, failures, counting). `kind` and the waiter lease are `inner`'s; it declares
 * no `timeoutMs` (the engine's default bound), since its calls may take longer than `inner`'s.
 */
export function mapCalls(inner: Store, around: (name: string, real: AnyCall) => AnyCall): Store {
  const group = <G extends object>(name: string, calls: G): G =>
    Object.fromEntries(
      Object.entries(calls).map(([method, call]) => [method, around(`${name}.${method}`, call as AnyCall)]),
    ) as G;
  return {
    kind: inner.kind,
    ...(inner.waiterLeaseMs === undefined ? {} : { waiterLeaseMs: inner.waiterLeaseMs }),
    semaphore: group("semaphore", inner.semaphore),
    lock: group("lock", inner.lock),
    watch: around("watch", inner.watch.bind(inner) as AnyCall) as Store["watch"],
  };
}

/** A promise and the functions that settle it, for gating a body from the test. */
export function gate<T = void>() {
  let open!: (value: T) => void;
  const opened = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** Polls `check` until it is true, failing after `withinMs` (a generous bound, not a figure under test). */
export async function eventually(check: () => boolean | Promise<boolean>, withinMs = 10_000, everyMs = 10): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > withinMs) throw new Error(`condition not met within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
