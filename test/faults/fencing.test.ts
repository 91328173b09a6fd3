import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PGlite } from "@electric-sql/pglite";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../support/stores.js";
import { leaksAfter, ownRedis, STARTING_MS, stopAll } from "./harness.js";
import { type LoadProcess, startLoad } from "./history.js";
import { report } from "./report.js";

// A lease tells its holder when it is lost; it cannot stop a holder that does not listen. The
// fence does, at the resource: here a Postgres row (PGlite, in this process, behind HTTP as a
// service would be) that three processes update under one lock, each with its lease's fence,
// through `UPDATE … WHERE fence < $2`. The test freezes a holder (SIGSTOP) between its grant and
// its write, for longer than its lease: another process takes the lock and writes; the frozen one
// resumes and writes too. The checker goes over every write the database received, in the order
// it applied them: no accepted write may carry a fence at or below one accepted before it. With
// the fence check taken out of the UPDATE, the same run must fail the checker (shown once below).

interface Attempt {
  fence: number;
  writer: string;
  accepted: boolean;
}

/** The protected resource: one row, written only through `write`, every attempt logged in the order applied. */
class Ledger {
  readonly attempts: Attempt[] = [];
  fenced = true;
  #server: Server | undefined;

  constructor(readonly db: PGlite) {}

  async start(): Promise<string> {
    await this.db.exec("CREATE TABLE IF NOT EXISTS ledger (id int PRIMARY KEY, value text NOT NULL, fence bigint NOT NULL)");
    this.#server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        const { fence, writer } = JSON.parse(body) as { fence: number; writer: string };
        this.write(fence, writer).then(
          (accepted) => response.end(JSON.stringify({ accepted })),
          (error: unknown) => {
            response.statusCode = 500;
            response.end(JSON.stringify({ error: String(error) }));
          },
        );
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async reset(fenced: boolean): Promise<void> {
    this.fenced = fenced;
    this.attempts.length = 0;
    await this.db.query("DELETE FROM ledger");
    await this.db.query("INSERT INTO ledger VALUES (1, 'initial', 0)");
  }

  async write(fence: number, writer: string): Promise<boolean> {
    // PGlite runs one query at a time: the order attempts are logged is the order they were applied.
    const result = this.fenced
      ? await this.db.query("UPDATE ledger SET value = $1, fence = $2 WHERE id = 1 AND fence < $2", [writer, fence])
      : await this.db.query("UPDATE ledger SET value = $1, fence = $2 WHERE id = 1", [writer, fence]);
    const accepted = result.affectedRows === 1;
    this.attempts.push({ fence, writer, accepted });
    return accepted;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

/** Accepted writes whose fence was not above every fence accepted before them. */
function outOfOrder(attempts: Attempt[]): Attempt[] {
  let newest = 0;
  const bad: Attempt[] = [];
  for (const attempt of attempts) {
    if (!attempt.accepted) continue;
    if (attempt.fence <= newest) bad.push(attempt);
    newest = Math.max(newest, attempt.fence);
  }
  return bad;
}

const TTL_MS = 600;
const STOPS = 3;

let ledger: Ledger;
let url: string;

beforeAll(async () => {
  ledger = new Ledger(new PGlite());
  url = await ledger.start();
}, 60_000);
afterAll(async () => {
  await ledger.stop();
  await ledger.db.close();
});
afterEach(stopAll);

/** Three writers under one lock; three times, the holder is frozen past its lease and then resumes to write. */
async function run(fenced: boolean, prefix: string) {
  await ledger.reset(fenced);
  const server = await ownRedis();
  const env = { REDIS_URL: server.url, PREFIX: prefix, DB_URL: url, TTL_MS, DURATION_MS: 14_000 };
  const writers: LoadProcess[] = [0, 1, 2].map(() => startLoad(env, "test/faults/fence-worker.ts"));
  const events = (w: LoadProcess) => w.events as unknown as { e: string; tok?: string; fence?: number; accepted?: boolean }[];
  await eventually(() => ledger.attempts.length >= 5, STARTING_MS);

  const stale: { fence: number; accepted: boolean }[] = [];
  for (let stop = 0; stop < STOPS; stop++) {
    const frozen = writers[stop % writers.length] as LoadProcess;
    const seen = events(frozen).filter((e) => e.e === "enter").length;
    // Frozen between its grant and its write (it pauses 150 to 250 ms before writing).
    await eventually(() => events(frozen).filter((e) => e.e === "enter").length > seen, 15_000, 1);
    frozen.child.kill("SIGSTOP");
    const entered = events(frozen)
      .filter((e) => e.e === "enter")
      .at(-1) as { tok: string; fence: number };
    // Its lease lapses; another process takes the lock and writes with a newer fence.
    await eventually(() => ledger.attempts.some((a) => a.accepted && a.fence > entered.fence), 15_000);
    frozen.child.kill("SIGCONT");
    // It resumes and writes, as if it still held the lock.
    await eventually(() => events(frozen).some((e) => e.e === "wrote" && e.tok === entered.tok), 15_000);
    const wrote = events(frozen).find((e) => e.e === "wrote" && e.tok === entered.tok) as { accepted: boolean };
    stale.push({ fence: entered.fence, accepted: wrote.accepted });
  }
  await Promise.all(writers.map((w) => w.finished));
  const lost = writers.flatMap((w) => events(w)).filter((e) => e.e === "lost").length;
  const leaks = await leaksAfter(server.url, prefix, TTL_MS);
  return { attempts: [...ledger.attempts], stale, lost, leaks };
}

describe("17. fencing: a holder frozen past its lease writes late, and the database refuses it", () => {
  it("17. with fencing: every stale write is refused, no accepted write is older than one before it", async () => {
    const { attempts, stale, lost, leaks } = await run(true, "fencing-on");
    const bad = outOfOrder(attempts);
    const refused = stale.filter((s) => !s.accepted).length;
    const ok = bad.length === 0 && refused === STOPS && leaks === 0;
    report({
      scenario: "17. fencing: holders SIGSTOPped past the lease write late",
      operations: attempts.length,
      maxHolders: "-",
      declaredLosses: lost,
      leaks,
      verdict: ok ? "pass" : "FAIL",
      notes: `${refused} of ${STOPS} late writes refused by Postgres (WHERE fence < $2); ${bad.length} accepted out of order`,
    });
    expect(bad).toEqual([]);
    expect(refused).toBe(STOPS);
    // The frozen holders were told, too: their leases were declared lost.
    expect(lost).toBeGreaterThanOrEqual(STOPS);
    expect(leaks).toBe(0);
  });

  it("17. the same run with the fence check taken out of the UPDATE: the checker catches the late writes", async () => {
    const { attempts, stale, leaks } = await run(false, "fencing-off");
    const bad = outOfOrder(attempts);
    report({
      scenario: "17. the same with fencing off (the checker must fail it)",
      operations: attempts.length,
      maxHolders: "-",
      declaredLosses: 0,
      leaks,
      verdict: bad.length > 0 ? "pass" : "FAIL",
      notes: `checker: ${bad.length} accepted writes older than one accepted before them (${stale.filter((s) => s.accepted).length} late writes accepted): caught, as it must be`,
    });
    expect(bad.length).toBeGreaterThanOrEqual(1);
    expect(stale.every((s) => s.accepted)).toBe(true);
  });
});
