// npm run example:tenants: three tenants share one upstream that takes 4 calls
// at once. One semaphore id holds all of them: `limit` is the upstream's
// capacity, `tenantLimit` the most one tenant may hold, and callers that wait
// are served tenant by tenant, so a tenant's burst does not make the others
// wait behind it. Runs on the embedded store, or on Redis when REDIS_URL is set.
import { type ClientInput, SemaphoreNotAcquiredError, semaphore } from "../../src/index.js";
import { exampleClient } from "../client.js";

const LIMIT = 4; // the upstream's capacity, all tenants together
const TENANT_LIMIT = 3; // the most one tenant may use: the permit it leaves is someone else's
const WORK_MS = 100;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the run showed: the most calls in flight, overall and per tenant, and how long globex's calls waited. */
export interface Outcome {
  peak: number;
  peakPerTenant: Record<string, number>;
  /** Per globex call: how many calls of other tenants started between its arrival and its own start. */
  globexWaitedBehind: number[];
  /** The fail-fast call acme made at its cap: the refusal's reason. */
  refusedAs: string | undefined;
}

export async function fairShares(client: ClientInput, log: (line: string) => void = console.log): Promise<Outcome> {
  const slots = semaphore({
    client,
    limit: LIMIT,
    tenantLimit: TENANT_LIMIT,
    waitMs: 30_000,
    prefix: `tenants-example-${process.pid}`,
  });
  const inFlight: Record<string, number> = {};
  const peakPerTenant: Record<string, number> = {};
  let peak = 0;
  let starts = 0;
  const running = () =>
    Object.entries(inFlight)
      .filter(([, n]) => n > 0)
      .map(([tenant, n]) => `${tenant} ${n}`)
      .join(", ");

  /** One call of a tenant to the upstream: `started` resolves with how many calls of others started before it. */
  const call = (tenant: string, n: number) => {
    const startsBefore = starts;
    let started!: (othersFirst: number) => void;
    const start = new Promise<number>((resolve) => {
      started = resolve;
    });
    const done = slots.run(
      "upstream",
      async () => {
        started(starts - startsBefore);
        starts++;
        inFlight[tenant] = (inFlight[tenant] ?? 0) + 1;
        peak = Math.max(
          peak,
          Object.values(inFlight).reduce((a, b) => a + b, 0),
        );
        peakPerTenant[tenant] = Math.max(peakPerTenant[tenant] ?? 0, inFlight[tenant]);
        log(`  ${`${tenant} #${n}`.padEnd(11)} starts   (in flight: ${running()})`);
        await sleep(WORK_MS);
        inFlight[tenant] -= 1;
      },
      { tenant },
    );
    return { start, done };
  };

  log(`acme sends a batch of 12 calls: it runs ${TENANT_LIMIT} at a time, and the last permit is not its to take`);
  const acme = Array.from({ length: 12 }, (_, n) => call("acme", n + 1));
  await Promise.all(acme.slice(0, TENANT_LIMIT).map(({ start }) => start));
  const acmeStats = await slots.stats("upstream", { tenant: "acme" });
  log(`  stats("upstream", { tenant: "acme" }): used ${acmeStats.used} of ${acmeStats.limit}, ${acmeStats.waiting} waiting`);
  let refusedAs: string | undefined;
  await slots
    .run("upstream", async () => {}, { tenant: "acme", waitMs: 0 })
    .catch((error: unknown) => {
      if (!(error instanceof SemaphoreNotAcquiredError)) throw error;
      refusedAs = error.reason;
      log(`  one more acme call that would not wait: refused at once, reason "${error.reason}"`);
    });

  log("globex sends one call: it takes the permit acme leaves, at once");
  const globex = [call("globex", 1)];
  const globexFirst = await (globex[0] as { start: Promise<number> }).start;

  log("initech sends a batch of 6: every permit is taken, so they wait, beside acme's");
  const initech = Array.from({ length: 6 }, (_, n) => call("initech", n + 1));
  await sleep(WORK_MS / 5);
  const waiting = (await slots.stats("upstream")).waiting;
  log(`globex sends another call while ${waiting} calls wait: it is served in turn, not behind them`);
  globex.push(call("globex", 2));
  const globexSecond = await (globex[1] as { start: Promise<number> }).start;
  await Promise.all([...acme, ...initech, ...globex].map(({ done }) => done));

  const perTenant = Object.entries(peakPerTenant).map(([tenant, n]) => `${tenant} ${n}`);
  log(
    `\nnever more than ${LIMIT} calls in flight (peak ${peak}), never more than ${TENANT_LIMIT} of one tenant (${perTenant.join(", ")})`,
  );
  log(`globex's calls waited for ${globexFirst} and ${globexSecond} calls of other tenants to start first`);
  return { peak, peakPerTenant, globexWaitedBehind: [globexFirst, globexSecond], refusedAs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { client, label } = exampleClient();
  console.log(`leasehold fair shares for tenants, on ${label}\n`);
  await fairShares(client);
  process.exit(0);
}
