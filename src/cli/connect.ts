import type { Store } from "../store/contract/types.js";
import { redisStore } from "../store/redis/index.js";
import { CliError } from "./errors.js";

/** The URL the command talks to: `--url`, else REDIS_URL, else the local default. */
export function redisUrl(given: string | undefined): string {
  const url = given ?? (process.env.REDIS_URL || "redis://127.0.0.1:6379");
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(
      `--url ${JSON.stringify(url)} is not a URL; pass one like redis://host:6379 or rediss://user:pass@host:6380.`,
      2,
    );
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new CliError(`--url must start with redis:// or rediss:// (TLS), got ${JSON.stringify(shownUrl(url))}.`, 2);
  }
  return url;
}

/** A URL as errors show it: never its password. */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}

/** A connected Redis and the leasehold store over it. */
export interface Connection {
  store: Store;
  close(): void;
}

interface IoredisModule {
  Redis: new (
    url: string,
    options: Record<string, unknown>,
  ) => {
    connect(): Promise<unknown>;
    disconnect(): void;
    on(event: "error", listener: (error: Error) => void): unknown;
  };
}

/**
 * Connects with ioredis (a peer dependency: a clear line if it is missing),
 * failing fast: no offline queue and no reconnection unless `keepTrying`
 * (the `watch` command, which shows an outage and goes on).
 */
export async function connect(url: string, keepTrying = false): Promise<Connection> {
  let ioredis: IoredisModule;
  try {
    ioredis = (await import("ioredis")) as unknown as IoredisModule;
  } catch {
    throw new CliError("the leasehold command talks to Redis through ioredis, which is not installed: npm install ioredis");
  }
  const redis = new ioredis.Redis(url, {
    lazyConnect: true,
    connectTimeout: 3000,
    commandTimeout: 5000,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: keepTrying ? () => 1000 : () => null,
  });
  // Failures reach the caller through connect() and each command; the events would repeat them.
  // The last one is kept: a connect() given up on says only "Connection is closed."
  let cause: Error | undefined;
  redis.on("error", (error) => {
    cause = error;
  });
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    const said = (cause ?? (error instanceof Error ? error : undefined))?.message ?? String(error);
    throw new CliError(`cannot reach Redis at ${shownUrl(url)}: ${said}`);
  }
  const store = redisStore(redis as never, { timeoutMs: 5000 });
  return { store, close: () => redis.disconnect() };
}
