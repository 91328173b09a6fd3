// npm run example:fencing: two jobs update one Postgres row under a lock. Job A
// takes the lock and then stalls (a GC pause, a stopped VM, a slow network)
// for longer than its lease, without looking at its lease's signal. Job B
// takes the lock meanwhile and writes. A wakes up and writes too: the
// database refuses it, because its fence is older than the row's.
// Postgres here is PGlite (Postgres compiled to WASM, in this process), so the
// example runs anywhere; the SQL is the same on a real server. Runs on the
// embedded store, or on Redis when REDIS_URL is set.
import { PGlite } from "@electric-sql/pglite";
import { lock } from "../../src/index.js";
import { exampleClient } from "../client.js";

const TTL_MS = 300;
const { client, label } = exampleClient();
const locks = lock({ client, ttlMs: TTL_MS, prefix: `fencing-example-${process.pid}` });
const db = new PGlite();
await db.exec(`
  CREATE TABLE invoices (id int PRIMARY KEY, total numeric NOT NULL, fence bigint NOT NULL DEFAULT 0);
  INSERT INTO invoices (id, total) VALUES (42, 100);
`);

/** The one write the lock protects: applied only if this fence is newer than the last one applied. */
async function setTotal(total: number, fence: number): Promise<boolean> {
  const result = await db.query("UPDATE invoices SET total = $1, fence = $2 WHERE id = 42 AND fence < $2", [total, fence]);
  return result.affectedRows === 1;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function jobA(): Promise<void> {
  const lease = await locks.acquire("invoice:42");
  if (!lease) throw new Error("A should get the free lock");
  console.log(`A holds the lock with fence ${lease.fence}; A stalls for ${TTL_MS * 3} ms (its lease is ${TTL_MS} ms)`);
  await sleep(TTL_MS * 3);
  // A holder that does not listen: it writes whatever lease.signal says.
  console.log(`A wakes up (lease lost: ${lease.signal.aborted}) and writes total = 150 with fence ${lease.fence}`);
  console.log(
    `  -> ${(await setTotal(150, lease.fence)) ? "applied" : "refused by the database: a newer fence has written since"}`,
  );
  await lease.release();
}

async function jobB(): Promise<void> {
  await sleep(TTL_MS / 2);
  // Queues behind A and gets the lock once A's lease lapses.
  await locks.run(
    "invoice:42",
    async (lease) => {
      console.log(`B holds the lock with fence ${lease.fence} and writes total = 200`);
      console.log(`  -> ${(await setTotal(200, lease.fence)) ? "applied" : "refused"}`);
    },
    { waitMs: TTL_MS * 4 },
  );
}

console.log(`leasehold fencing example, on ${label}\n`);
await Promise.all([jobA(), jobB()]);
const row = (await db.query<{ total: string; fence: number }>("SELECT total, fence FROM invoices WHERE id = 42")).rows[0];
console.log(`\nThe row: total = ${row?.total}, fence = ${row?.fence} (B's write stands; A's late write was refused)`);
await db.close();
process.exit(0);
