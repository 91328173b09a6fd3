import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { LockLeaseLostError, lock, redisStore, SemaphoreLeaseLostError, semaphore } from "../../src/index.js";
import { storeKey } from "../../src/store/contract/keys.js";
import { COMMAND, cli, type Ran } from "../support/cli.js";
import { newRedis, redisUrl, uniquePrefix } from "../support/redis.js";
import { freePort } from "../support/redis-server.js";
import { eventually, gate } from "../support/stores.js";

/** One clear line on stderr, nothing on stdout, and the exit status. */
function failedWith(ran: Ran, code: number, says: RegExp): void {
  expect(ran.code).toBe(code);
  expect(ran.stdout).toBe("");
  expect(ran.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(ran.stderr).toMatch(/^leasehold: /);
  expect(ran.stderr).toMatch(says);
}

const ended: (() => void)[] = [];
afterEach(() => {
  for (const end of ended.splice(0)) end();
});

/** Runs `fn` under a lease until the test ends it; resolves what `run` settled with. */
function holding<T>(start: (body: (signal: AbortSignal) => Promise<void>) => Promise<T>): Promise<T | unknown> {
  const { opened, open } = gate();
  ended.push(open);
  return start(async (signal) => {
    await Promise.race([opened, new Promise((resolve) => signal.addEventListener("abort", resolve))]);
  }).catch((error: unknown) => error);
}

// Every test here starts processes (a second or two each on a busy two-core machine): generous bounds.
const SLOW = { timeout: 120_000 };

describe("leasehold inspect", SLOW, () => {
  it("lists limit, used, holders (token, owner, age, expiry, weight, tenant) and waiters in order", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore(newRedis(), { limit: 3, prefix, tenantLimit: 2 });
    const heavy = await slots.acquire("openai", { weight: 2, tenant: "acme", owner: "api-1:4312" });
    await new Promise((resolve) => setTimeout(resolve, 5)); // listed oldest first
    const light = await slots.acquire("openai", { owner: "req-7f3a" });
    const waiter = slots.acquire("openai", { waitMs: 20_000, owner: "patient" });
    await eventually(async () => (await slots.stats("openai")).waiting === 1);

    const ran = await cli(["inspect", "openai", "--url", redisUrl(), "--prefix", prefix]);
    expect(ran.stderr).toBe("");
    expect(ran.code).toBe(0);
    const lines = ran.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(`semaphore "openai" (key {${prefix}:semaphore:openai}): 3 of 3 permits used by 2 holders; 1 waiting.`);
    expect(lines[2]).toMatch(/^HOLDER\s+OWNER\s+AGE\s+EXPIRES IN\s+WEIGHT\s+TENANT$/);
    expect(lines[3]).toMatch(
      new RegExp(`^${literal(heavy?.token.slice(0, 10))}\\s+api-1:4312\\s+\\S+\\s+\\d+\\.\\ds\\s+2\\s+acme$`),
    );
    expect(lines[4]).toMatch(new RegExp(`^${literal(light?.token.slice(0, 10))}\\s+req-7f3a\\s+\\S+\\s+\\S+\\s+1\\s+-$`));
    expect(lines[6]).toMatch(/^WAITING\s+TOKEN\s+OWNER\s+WAITED\s+WEIGHT\s+TENANT$/);
    expect(lines[7]).toMatch(/^1\s+\S{10}\s+patient\s+\S+\s+1\s+-$/);

    const json = await cli(["inspect", "openai", "--url", redisUrl(), "--prefix", prefix, "--json"]);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout);
    expect(report).toMatchObject({
      kind: "semaphore",
      id: "openai",
      prefix,
      key: `{${prefix}:semaphore:openai}`,
      limit: 3,
      used: 3,
    });
    expect(report.holders).toMatchObject([
      { token: heavy?.token, owner: "api-1:4312", weight: 2, tenant: "acme", limit: 3 },
      { token: light?.token, owner: "req-7f3a", weight: 1 },
    ]);
    expect(report.holders[0].expiresInMs).toBeGreaterThan(30_000);
    expect(report.holders[0].ageMs).toBeGreaterThanOrEqual(0);
    expect(report.waiting).toMatchObject([{ position: 1, owner: "patient", weight: 1 }]);

    await light?.release();
    const granted = await waiter;
    await heavy?.release();
    await granted?.release();
  });

  it("an id with nothing held or waiting says so plainly and exits 0; the URL defaults to REDIS_URL", async () => {
    const ran = await cli(["inspect", "nobody-here", "--prefix", uniquePrefix()], { REDIS_URL: redisUrl() });
    expect(ran).toMatchObject({ code: 0, stderr: "" });
    expect(ran.stdout).toMatch(
      /^semaphore "nobody-here" \(key \{t-\w+:semaphore:nobody-here\}\): nothing held, nobody waiting\.\n$/,
    );
    const json = await cli(["inspect", "nobody-here", "--kind", "lock", "--json", "--url", redisUrl()]);
    expect(JSON.parse(json.stdout)).toMatchObject({ kind: "lock", prefix: "lock", used: 0, holders: [], waiting: [] });
  });

  it("a lock: who holds it and since when", async () => {
    const prefix = uniquePrefix();
    const locks = lock(newRedis(), { prefix, owner: "billing-cron" });
    const lease = await locks.acquire("order:42", { ttlMs: 30_000 });
    const ran = await cli(["inspect", "order:42", "--kind", "lock", "--prefix", prefix, "--url", redisUrl()]);
    expect(ran.code).toBe(0);
    expect(ran.stdout.split("\n")[0]).toMatch(
      new RegExp(
        `^lock "order:42" \\(key \\{${prefix}:lock:order:42\\}\\): held by billing-cron for \\S+, expires in \\S+; nobody waiting\\.$`,
      ),
    );
    await lease?.release();
  });
});

describe("leasehold release", SLOW, () => {
  it("--token frees a lock as its expiry would: the waiter is granted, and the holder's run is told at its next renewal", async () => {
    const prefix = uniquePrefix();
    const locks = lock(newRedis(), { prefix, ttlMs: 5_000 });
    let signalled: unknown;
    const held = holding((body) =>
      locks.run(
        "order:42",
        async (lease) => {
          lease.signal.addEventListener("abort", () => {
            signalled = lease.signal.reason;
          });
          await body(lease.signal);
        },
        { heartbeatMs: 100, owner: "stuck-job" },
      ),
    );
    await eventually(async () => (await locks.holder("order:42"))?.owner === "stuck-job");
    const holder = await locks.holder("order:42");
    const waiter = locks.acquire("order:42", { waitMs: 20_000, owner: "next-in-line" });
    const store = redisStore(newRedis());
    await eventually(
      async () => (await store.lock.inspect({ storeKey: storeKey(prefix, "lock", "order:42") })).waiters.length === 1,
    );

    // A token may start with "-": the word after --token is its value, whatever it looks like.
    const ran = await cli([
      "release",
      "order:42",
      "--kind",
      "lock",
      "--prefix",
      prefix,
      "--token",
      holder?.token.slice(0, 12) as string,
      "--url",
      redisUrl(),
    ]);
    expect(ran.stderr).toBe("");
    expect(ran.code).toBe(0);
    expect(ran.stdout).toMatch(/^released \S{10} \(stuck-job, held \S+\): it learns of the loss at its next renewal\.\n/);

    const next = await waiter;
    expect(next).not.toBeNull();
    expect(await locks.holder("order:42")).toMatchObject({ owner: "next-in-line", token: next?.token });
    expect(await held).toBeInstanceOf(LockLeaseLostError);
    expect(signalled).toBeInstanceOf(LockLeaseLostError);
    await next?.release();
  });

  it("--all frees every holder of a semaphore; the waiters stay queued and are granted; the holders learn of it", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore(newRedis(), { limit: 2, prefix, leaseMs: 5_000 });
    const runs = ["a", "b"].map((owner) =>
      holding((body) => slots.run("jobs", (lease) => body(lease.signal), { heartbeatMs: 100, owner: `holder-${owner}` })),
    );
    await eventually(async () => (await slots.holders("jobs")).length === 2);
    const waiters = ["c", "d"].map((owner) => slots.acquire("jobs", { waitMs: 20_000, owner: `waiter-${owner}` }));
    await eventually(async () => (await slots.stats("jobs")).waiting === 2);

    const refused = await cli(["release", "jobs", "--all", "--prefix", prefix, "--url", redisUrl()]);
    failedWith(refused, 2, /release all 2 holders of semaphore "jobs" \(2 permits held\): pass --yes to confirm/i);
    expect((await slots.holders("jobs")).map((h) => h.owner).sort()).toEqual(["holder-a", "holder-b"]);

    const ran = await cli(["release", "jobs", "--all", "--yes", "--prefix", prefix, "--url", redisUrl()]);
    expect(ran.stderr).toBe("");
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain("(holder-a, held");
    expect(ran.stdout).toContain("(holder-b, held");
    const granted = await Promise.all(waiters);
    expect(granted.every((lease) => lease !== null)).toBe(true);
    expect((await slots.holders("jobs")).map((h) => h.owner).sort()).toEqual(["waiter-c", "waiter-d"]);
    for (const outcome of await Promise.all(runs)) expect(outcome).toBeInstanceOf(SemaphoreLeaseLostError);
    for (const lease of granted) await lease?.release();

    const nothing = await cli(["release", "jobs", "--all", "--prefix", prefix, "--url", redisUrl()]);
    expect(nothing).toMatchObject({ code: 0, stderr: "" });
    expect(nothing.stdout).toMatch(/nothing held, nobody waiting\. Nothing to release\.\n$/);
  });

  it("--all asks on a terminal: anything but yes releases nothing", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore(newRedis(), { limit: 2, prefix });
    const lease = await slots.acquire("t", { owner: "on-call" });
    // `script` gives the command a terminal (util-linux, in every Debian); what it types in is piped.
    const onTerminal = (answer: string) =>
      new Promise<Ran>((resolve, reject) => {
        const line = [...COMMAND, "release", "t", "--all", "--prefix", prefix, "--url", redisUrl()]
          .map((a) => `'${a}'`)
          .join(" ");
        const child = spawn("script", ["-qec", line, "/dev/null"], { stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        child.stdout.on("data", (chunk) => {
          stdout += chunk;
          if (stdout.includes("[y/N]")) child.stdin.end(`${answer}\n`);
        });
        child.once("error", reject);
        child.once("close", (code) => resolve({ code, stdout, stderr: "" }));
      });
    const no = await onTerminal("n");
    expect(no.stdout).toContain(
      'Release all 1 holder of semaphore "t" (1 permit held)? Waiters stay queued and are granted. [y/N]',
    );
    expect(no.stdout).toContain("leasehold: nothing released.");
    expect(no.code).toBe(1);
    expect(await slots.holders("t")).toMatchObject([{ owner: "on-call" }]);
    const yes = await onTerminal("y");
    expect(yes.code).toBe(0);
    expect(yes.stdout).toContain("released");
    expect(await slots.holders("t")).toEqual([]);
    expect(await lease?.release()).toBe(false);
  });

  it("--token of a semaphore holder frees only that one; an unknown token fails with one line", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore(newRedis(), { limit: 3, prefix });
    const keep = await slots.acquire("k", { owner: "keep" });
    const drop = await slots.acquire("k", { owner: "drop", weight: 2 });
    const ran = await cli(["release", "k", "--token", drop?.token as string, "--prefix", prefix, "--url", redisUrl()]);
    expect(ran.code).toBe(0);
    expect(await slots.holders("k")).toMatchObject([{ owner: "keep" }]);
    expect(await slots.stats("k")).toMatchObject({ used: 1 });
    expect(await drop?.extend()).toBe(false);
    failedWith(
      await cli(["release", "k", "--token", "nosuchtoken", "--prefix", prefix, "--url", redisUrl()]),
      1,
      /no holder of semaphore "k" has a token starting with "nosuchtoken"/,
    );
    await keep?.release();
  });
});

describe("leasehold watch", SLOW, () => {
  it("reads again every interval until interrupted, then exits 0", async () => {
    const prefix = uniquePrefix();
    const slots = semaphore(newRedis(), { limit: 2, prefix });
    const child = spawn(
      COMMAND[0],
      [...COMMAND.slice(1), "watch", "w", "--json", "--interval", "100", "--prefix", prefix, "--url", redisUrl()],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    const readings: { used: number }[] = [];
    createInterface({ input: child.stdout }).on("line", (line) => readings.push(JSON.parse(line)));
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    await eventually(() => readings.length >= 1, 20_000);
    expect(readings[0]).toMatchObject({ used: 0 });
    const lease = await slots.acquire("w", { owner: "watched" });
    await eventually(() => readings.some((reading) => reading.used === 1));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    await lease?.release();
  });
});

describe("leasehold watch into a pipe that closes (issue #27, defect 10)", SLOW, () => {
  it("ends quietly with status 0 when its reader goes away, as `watch … | head` does", async () => {
    const prefix = uniquePrefix();
    const child = spawn(
      COMMAND[0],
      [...COMMAND.slice(1), "watch", "w", "--json", "--interval", "100", "--prefix", prefix, "--url", redisUrl()],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once("close", (code, signal) => resolve({ code, signal })),
    );
    // As `head -n 1`: one reading, then the pipe's reading end is closed.
    await new Promise((resolve) => child.stdout.once("data", resolve));
    child.stdout.destroy();
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(stderr).toBe("");
  });
});

describe("leasehold inspect with the other --kind (issue #27, defect 10)", SLOW, () => {
  it("says that the other kind holds the id, and how to look at it", async () => {
    const prefix = uniquePrefix();
    const locks = lock(newRedis(), { prefix, owner: "billing-cron" });
    const held = await locks.acquire("order:42");
    const asSemaphore = await cli(["inspect", "order:42", "--prefix", prefix, "--url", redisUrl()]);
    expect(asSemaphore).toMatchObject({ code: 0, stderr: "" });
    expect(asSemaphore.stdout).toBe(
      `semaphore "order:42" (key {${prefix}:semaphore:order:42}): nothing held as a semaphore, nobody waiting; a lock holds this id: pass --kind lock.\n`,
    );
    const json = await cli(["inspect", "order:42", "--prefix", prefix, "--url", redisUrl(), "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ kind: "semaphore", used: 0, holders: [], heldAs: "lock" });
    await held?.release();

    // The default prefixes: a semaphore under "semaphore", looked for as a lock under "lock".
    const id = `${prefix}-id`;
    const slots = semaphore(newRedis(), { limit: 2 });
    const permit = await slots.acquire(id);
    const asLock = await cli(["inspect", id, "--kind", "lock", "--url", redisUrl()]);
    expect(asLock.stdout).toBe(
      `lock "${id}" (key {lock:lock:${id}}): nothing held as a lock, nobody waiting; a semaphore holds this id: pass --kind semaphore.\n`,
    );
    await permit?.release();
    // Nothing held by either: no hint.
    const idle = await cli(["inspect", id, "--kind", "lock", "--url", redisUrl()]);
    expect(idle.stdout).toBe(`lock "${id}" (key {lock:lock:${id}}): nothing held, nobody waiting.\n`);
  });
});

describe("leasehold errors: one line, a non-zero status", SLOW, () => {
  it("a URL that is not redis:// or rediss://, or not a URL, is a usage error", async () => {
    failedWith(
      await cli(["inspect", "x", "--url", "http://127.0.0.1:6379"]),
      2,
      /--url must start with redis:\/\/ or rediss:\/\//,
    );
    failedWith(await cli(["inspect", "x", "--url", "not a url"]), 2, /--url "not a url" is not a URL/);
  });

  it("Redis down: says where it could not reach, without the password", async () => {
    const port = await freePort();
    const ran = await cli(["inspect", "x", "--url", `redis://user:secret@127.0.0.1:${port}`]);
    failedWith(ran, 1, new RegExp(`cannot reach Redis at redis://user:\\*\\*\\*@127\\.0\\.0\\.1:${port}`));
    expect(ran.stderr).not.toContain("secret");
  });

  it("bad arguments name what is wrong", async () => {
    const url = ["--url", redisUrl()];
    const cases: [string[], RegExp][] = [
      [[], /a command is needed/],
      [["frobnicate", "x"], /unknown command "frobnicate"/],
      [["inspect"], /inspect needs the id/],
      [["inspect", "a", "b"], /takes one id/],
      [["inspect", "x", "--nope"], /Unknown option '--nope'/],
      [["inspect", "x", "--kind", "mutex", ...url], /--kind must be semaphore or lock/],
      [["inspect", "x", "--prefix", "a:b", ...url], /prefix/],
      [["inspect", "x", "--token", "abc", ...url], /--token does not apply to inspect/],
      [["release", "x", ...url], /release needs --token <token> \(one holder\) or --all/],
      [["release", "x", "--all", "--token", "a", ...url], /not both/],
      [["watch", "x", "--interval", "5", ...url], /--interval must be/],
    ];
    // Two at a time: each is a process of its own, and none reaches Redis.
    for (let i = 0; i < cases.length; i += 2) {
      const batch = cases.slice(i, i + 2);
      const ran = await Promise.all(batch.map(([args]) => cli(args)));
      for (const [j, result] of ran.entries()) failedWith(result, 2, (batch[j] as [string[], RegExp])[1]);
    }
    const help = await cli(["--help"]);
    expect(help).toMatchObject({ code: 0, stderr: "" });
    expect(help.stdout).toContain("Usage: leasehold <command> <id> [options]");
  });
});

function literal(text: string | undefined): string {
  return (text ?? "").replace(/[.*+?^${}()|[\]\\-]/g, "\\$&");
}
