// review8: a heavy lease (a weight in the thousands, which validation accepts: only weight <= limit
// is checked) on the Redis store as on the memory store. Each permit is a member of the holders set,
// and the scripts wrote all of a lease's members in one ZADD or ZREM through Lua's unpack, which
// stops at 8,000 values: the Redis store then failed every take, grant, extend and release of such
// a lease (StoreUnavailableError), where the memory store admits it.
import { describe, expect, it } from "vitest";
import { memoryStore, semaphore } from "../../src/index.js";
import { newRedis, uniquePrefix } from "../support/redis.js";

const LIMIT = 20_000;
const HEAVY = 9_000;

const make = (kind: string) =>
  kind === "redis" ? semaphore(newRedis(), { limit: LIMIT, prefix: uniquePrefix() }) : semaphore(memoryStore(), { limit: LIMIT });

describe("review8: heavy leases", () => {
  it.each(["memory", "redis"])("a fail-fast take, an extend and a release of a heavy lease (%s)", async (kind) => {
    const slots = make(kind);
    const lease = await slots.acquire("k", { weight: HEAVY });
    expect(lease).not.toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: HEAVY, holders: 1 });
    expect(await lease?.extend(60_000)).toBe(true);
    expect(await lease?.release()).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0 });
  });

  it.each(["memory", "redis"])("a heavy waiter granted, then released; a tenant's heavy lease (%s)", async (kind) => {
    const slots = make(kind);
    const first = await slots.acquire("k", { weight: LIMIT - HEAVY + 1 });
    expect(first).not.toBeNull();
    const waiting = slots.acquire("k", { weight: HEAVY, waitMs: 10_000 });
    // A second heavy caller on the full path, through the waiting room.
    await expect.poll(async () => (await slots.stats("k")).waiting).toBe(1);
    expect(await first?.release()).toBe(true);
    const granted = await waiting;
    expect(granted).not.toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: HEAVY, holders: 1, waiting: 0 });
    expect(await granted?.release()).toBe(true);
    const tenant = await slots.acquire("k", { weight: HEAVY, tenant: "t", tenantLimit: LIMIT });
    expect(tenant).not.toBeNull();
    expect(await slots.stats("k")).toMatchObject({ used: HEAVY });
    expect(await tenant?.release()).toBe(true);
    expect(await slots.stats("k")).toMatchObject({ used: 0, holders: 0, waiting: 0 });
  });
});
