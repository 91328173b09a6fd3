import { describe, expect, it } from "vitest";
import { lock, semaphore } from "../../src/index.js";
import { uniquePrefix } from "../support/redis.js";
import { storesUnderTest } from "../support/stores.js";

interface Grant {
  id: string;
  fence: number;
  sentAt: number;
  answeredAt: number;
}

/** Every fence on an id is given once, and a grant answered before another was asked for has a lower fence. */
function checkOrder(grants: Grant[]): void {
  const byId = new Map<string, Grant[]>();
  for (const grant of grants) byId.set(grant.id, [...(byId.get(grant.id) ?? []), grant]);
  for (const [id, list] of byId) {
    const fences = list.map((g) => g.fence);
    expect(new Set(fences).size, `duplicate fences on ${id}`).toBe(fences.length);
    const byAnswer = [...list].sort((a, b) => a.answeredAt - b.answeredAt);
    const bySent = [...list].sort((a, b) => a.sentAt - b.sentAt);
    // For each grant, the highest fence among those answered before it was sent must be below its own.
    let i = 0;
    let highest = 0;
    for (const grant of bySent) {
      while (i < byAnswer.length && (byAnswer[i] as Grant).answeredAt < grant.sentAt) {
        highest = Math.max(highest, (byAnswer[i] as Grant).fence);
        i++;
      }
      expect(grant.fence, `a grant on ${id} sent after fence ${highest} was answered`).toBeGreaterThan(highest);
    }
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(storesUnderTest.filter((s) => s.name === "memory" || s.name === "ioredis"))(
  "fences under a mixed load on the $name store",
  ({ make }) => {
    it("never repeat and never go back: batches, weights, tenants, waiters, hand-offs, lapses", async () => {
      const store = make({ waiterLeaseMs: 600 });
      const prefix = uniquePrefix();
      const slots = semaphore({ client: store, limit: 3, tenantLimit: 2, prefix: `${prefix}-s`, leaseMs: 300 });
      const locks = lock({ client: store, prefix: `${prefix}-l`, ttlMs: 300 });
      const grants: Grant[] = [];
      const until = performance.now() + 4000;
      let seed = 7;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      const worker = async () => {
        while (performance.now() < until) {
          const id = `k${Math.floor(random() * 2)}`;
          const onLock = random() < 0.4;
          const waitMs = random() < 0.5 ? 300 : 0;
          const sentAt = performance.now();
          const lease = onLock
            ? await locks.acquire(id, { waitMs }).catch(() => null)
            : await slots
                .acquire(id, {
                  waitMs,
                  weight: random() < 0.3 ? 2 : 1,
                  ...(random() < 0.5 ? { tenant: random() < 0.5 ? "a" : "b" } : {}),
                })
                .catch(() => null);
          const answeredAt = performance.now();
          if (lease === null) {
            await pause(random() * 5);
            continue;
          }
          grants.push({ id: `${onLock ? "lock" : "sem"}:${id}`, fence: lease.fence, sentAt, answeredAt });
          const hold = random();
          if (hold < 0.1) continue; // never released: it lapses
          if (hold < 0.3) await lease.extend().catch(() => false);
          await pause(random() * 10);
          await lease.release().catch(() => false);
        }
      };
      await Promise.all(Array.from({ length: 24 }, worker));
      expect(grants.length).toBeGreaterThan(200);
      checkOrder(grants);
    }, 30_000);
  },
);
