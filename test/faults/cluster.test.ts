import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import express from "express";
import { Cluster, Redis } from "ioredis";
import request from "supertest";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { semaphore as guard } from "../../integrations/express/index.js";
import { lock, semaphore } from "../../src/index.js";
import { type RedisServer, startRedisServer } from "../support/redis-server.js";
import { eventually } from "../support/stores.js";
import { report } from "./report.js";

/** A port that is free together with its cluster bus port (port + 10000). */
async function clusterPort(taken: Set<number>): Promise<number> {
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if (!taken.has(port) && (await free(port)) && (await free(port + 10_000))) {
      taken.add(port);
      return port;
    }
  }
}

const nodes: RedisServer[] = [];
let dir = "";
let cluster: Cluster;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "leasehold-cluster-"));
  const taken = new Set<number>();
  for (let n = 0; n < 3; n++) {
    const port = await clusterPort(taken);
    nodes.push(
      await startRedisServer(
        [
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          `nodes-${port}.conf`,
          "--dir",
          dir,
          "--cluster-node-timeout",
          "2000",
        ],
        port,
      ),
    );
  }
  execFileSync(
    "redis-cli",
    ["--cluster", "create", ...nodes.map((node) => `127.0.0.1:${node.port}`), "--cluster-replicas", "0", "--cluster-yes"],
    {
      stdio: "ignore",
    },
  );
  for (const node of nodes) {
    const client = new Redis(node.port);
    await eventually(async () => /cluster_state:ok/.test(String(await client.cluster("INFO"))), 20_000, 100);
    client.disconnect();
  }
  cluster = new Cluster([{ host: "127.0.0.1", port: nodes[0]!.port }]);
  await eventually(async () => cluster.status === "ready", 20_000);
}, 60_000);

afterAll(async () => {
  cluster?.disconnect();
  await Promise.all(nodes.splice(0).map((node) => node.stop()));
  rmSync(dir, { recursive: true, force: true });
});

const awkwardIds = ["plain", "{tag}", "a}b{c", "}leading", "x:y:z", "with space", "ünïcødé-日本-🚀"];

describe("11. a 3-master Redis Cluster", () => {
  it("11. semaphore (with waiting), lock and the Express adapter work through ioredis Cluster; every key of an id shares a slot", async () => {
    let operations = 0;
    const slots = semaphore(cluster, { limit: 1, prefix: "c" });
    const locks = lock(cluster, { prefix: "cl" });
    const slotsSeen = new Set<number>();
    for (const id of awkwardIds) {
      const held = await slots.acquire(id, { weight: 1 });
      const waiting = slots.acquire(id, { waitMs: 10_000 });
      const base = `{c:${id}}`;
      await eventually(async () => (await cluster.zcard(`${base}:q`)) === 1);
      const keys = [base, `${base}:m`, `${base}:q`, `${base}:qe`, `${base}:ch`];
      const keySlots = await Promise.all(keys.map((key) => cluster.cluster("KEYSLOT", key) as Promise<number>));
      expect(new Set(keySlots).size).toBe(1);
      slotsSeen.add(keySlots[0] as number);
      await held?.release();
      const next = await waiting;
      expect(next).not.toBeNull();
      expect(await slots.count(id)).toBe(1);
      await next?.release();
      expect(await locks.run(id, async () => "locked")).toBe("locked");
      operations += 3;
    }
    // The ids spread over the cluster rather than all landing on one node.
    expect(slotsSeen.size).toBeGreaterThan(1);

    const app = express();
    app.get("/t/:tenant", guard("api", 1, { client: cluster, key: (req) => String(req.params.tenant) }), (req, res) => {
      res.json({ key: req.lease?.key });
    });
    for (const id of awkwardIds) {
      const res = await request(app).get(`/t/${encodeURIComponent(id)}`);
      expect(res.body).toEqual({ key: `api:${id}` });
      operations++;
    }
    report({
      scenario: "11. Redis Cluster, 3 masters",
      operations,
      maxHolders: 1,
      declaredLosses: 0,
      leaks: 0,
      verdict: "pass",
      notes: `${slotsSeen.size} slots used`,
    });
  });
});
