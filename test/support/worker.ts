// A child process that takes leases on command, for tests that need several
// processes on one Redis. Reads JSON lines on stdin, writes JSON lines on
// stdout; every event carries process.hrtime.bigint() (comparable across
// processes on one host) as `t`. `flood` keeps `inFlight` runs going until
// `stop` names its label.
import { createInterface } from "node:readline";
import { Redis } from "ioredis";
import { LeaseholdError, lock, redisStore, semaphore } from "../../src/index.js";

const redis = new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379", { maxRetriesPerRequest: null });
redis.on("error", () => {});
const store = redisStore(redis, { waiterLeaseMs: Number(process.env.WAITER_LEASE_MS ?? 5000), timeoutMs: 2000 });

function emit(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ...event, pid: process.pid, t: process.hrtime.bigint().toString() })}\n`);
}

interface Command {
  op: "run" | "flood" | "stop" | "exit";
  kind?: "semaphore" | "lock";
  prefix: string;
  id: string;
  label: string;
  limit?: number;
  waitMs?: number;
  holdMs?: number;
  leaseMs?: number;
  tenant?: string;
  tenantLimit?: number;
  /** Emit `sent` with the Redis server's clock (µs, the scale of fences) just before acquiring. */
  mark?: boolean;
  /** For `flood`: how many runs to keep going at once. */
  inFlight?: number;
}

const floods = new Map<string, { stopped: boolean }>();

/** The options a command gave: absent ones are left out, not passed as undefined. */
function given<T extends Record<string, unknown>>(options: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

async function run(command: Command): Promise<void> {
  const body = async (lease: { signal: AbortSignal; token: string; fence: number }) => {
    emit({ event: "enter", label: command.label, token: lease.token, fence: lease.fence, tenant: command.tenant });
    await new Promise((resolve) => setTimeout(resolve, command.holdMs ?? 0));
    emit({ event: "exit", label: command.label, aborted: lease.signal.aborted });
  };
  try {
    if (command.kind === "lock") {
      await lock({ client: store, prefix: command.prefix }).run(
        command.id,
        body,
        given({ waitMs: command.waitMs, ttlMs: command.leaseMs }),
      );
    } else {
      const slots = semaphore({ client: store, prefix: command.prefix, limit: command.limit ?? 1 });
      if (command.mark === true) {
        const [seconds, micros] = await redis.time();
        emit({ event: "sent", label: command.label, serverUs: Number(seconds) * 1e6 + Number(micros) });
      }
      await slots.run(
        command.id,
        body,
        given({
          waitMs: command.waitMs,
          leaseMs: command.leaseMs,
          tenant: command.tenant,
          tenantLimit: command.tenantLimit,
        }),
      );
    }
    emit({ event: "done", label: command.label });
  } catch (error) {
    emit({ event: "failed", label: command.label, code: error instanceof LeaseholdError ? error.code : String(error) });
  }
}

async function flood(command: Command): Promise<void> {
  const state = { stopped: false };
  floods.set(command.label, state);
  let n = 0;
  await Promise.all(
    Array.from({ length: command.inFlight ?? 1 }, async () => {
      while (!state.stopped) await run({ ...command, op: "run", label: `${command.label}.${n++}` });
    }),
  );
  emit({ event: "stopped", label: command.label });
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const command = JSON.parse(line) as Command;
  if (command.op === "exit") {
    redis.disconnect();
    process.exit(0);
  }
  if (command.op === "stop") {
    const state = floods.get(command.label);
    if (state !== undefined) state.stopped = true;
    return;
  }
  void (command.op === "flood" ? flood(command) : run(command));
});
emit({ event: "ready" });
