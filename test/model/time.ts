import { createHash } from "node:crypto";
import type { Redis } from "ioredis";
import { luaSource } from "../../scripts/lua-source.mjs";
import type { MemoryClock } from "../../src/store/memory/clock.js";
import { scripts } from "../../src/store/redis/lua.generated.js";
import type { Scripts } from "../../src/store/redis/scripts.js";

/** Where the test build of the scripts reads its clock. Not in any id's slot: standalone Redis only. */
export const CLOCK_KEY = "leasehold-model:clock";

const serverClock = luaSource("lib/clock.lua");
const testClock = `-- Test build: the model-based suite sets the clock.
local function clock()
  local now = tonumber(redis.call('GET', '${CLOCK_KEY}'))
  return now, now * 1000
end
`;

/** Every script with `lib/clock.lua` swapped for a clock the suite sets: the same code on a time it controls. */
export const scriptsOnTestClock: Scripts = Object.fromEntries(
  Object.entries(scripts).map(([name, script]) => {
    const source = script.source.split(serverClock).join(testClock);
    return [name, { name: script.name, source, sha: createHash("sha1").update(source).digest("hex") }];
  }),
) as unknown as Scripts;

interface Timer {
  at: number;
  callback: () => void;
  cancelled: boolean;
}

/**
 * One clock for the model, the memory store (through `memoryClock`) and the
 * Lua scripts (through CLOCK_KEY), in whole ms. It starts ten days ahead of
 * the real clock and only moves forward, so Redis never expires a key on
 * its own during a run (every expiry the scripts set is absolute, from this
 * clock, and lies ahead of real time); `advance` expires keys itself, at
 * the clock's time, as Redis would.
 */
export class TestTime {
  now = Math.floor(Date.now() / 1000) * 1000 + 10 * 86_400_000;
  readonly #timers: Timer[] = [];

  readonly memoryClock: MemoryClock = {
    now: () => this.now,
    micros: () => this.now * 1000,
    setTimeout: (callback, ms) => {
      const timer = { at: this.now + Math.ceil(ms), callback, cancelled: false };
      this.#timers.push(timer);
      return timer;
    },
    clearTimeout: (handle) => {
      (handle as Timer).cancelled = true;
    },
  };

  async start(redis: Redis): Promise<void> {
    await redis.set(CLOCK_KEY, this.now);
  }

  /** Moves the clock, fires the memory store's due timers, and expires the Redis keys under `pattern` that are due. */
  async advance(ms: number, redis: Redis, pattern: string): Promise<void> {
    this.now += ms;
    await redis.set(CLOCK_KEY, this.now);
    for (;;) {
      const due = this.#timers.filter((timer) => !timer.cancelled && timer.at <= this.now).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      due.cancelled = true;
      due.callback();
    }
    for (const key of await keysUnder(redis, pattern)) {
      const at = await redis.pexpiretime(key);
      // Redis's own rule: a key is gone once the time is past its expiry.
      if (at > 0 && at < this.now) await redis.del(key);
    }
  }
}

export async function keysUnder(redis: Redis, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== "0");
  return found;
}
