import { Redis } from "ioredis";
import { createClient } from "redis";
import type { RedisClient } from "../../src/index.js";

/** The client libraries the scenarios that break connections run over. */
export const FAULT_CLIENTS = ["ioredis", "node-redis"] as const;
export type FaultClientName = (typeof FAULT_CLIENTS)[number];

/** How a scenario's row names the client: nothing for ioredis (the rows as they were), else in brackets. */
export const through = (name: FaultClientName): string => (name === "ioredis" ? "" : ` (${name})`);

/** A client as a scenario uses it: handed to leasehold, pinged, closed. */
export interface FaultClient {
  client: RedisClient;
  ping(): Promise<unknown>;
  close(): void;
}

/**
 * A client of the named library to `url`, configured as a service would be:
 * ioredis retrying every command through reconnects, node-redis with its
 * default reconnect strategy, connected before use. Connection errors are
 * expected here; they reach leasehold's callers through their calls.
 */
export async function faultClient(name: string, url: string): Promise<FaultClient> {
  if (name === "node-redis") {
    const client = createClient({ url });
    client.on("error", () => {});
    await client.connect();
    return { client, ping: () => client.ping(), close: () => client.destroy() };
  }
  if (name !== "ioredis") throw new Error(`unknown CLIENT ${name}: expected ioredis or node-redis`);
  const client = new Redis(url, { maxRetriesPerRequest: null, enableOfflineQueue: true });
  client.on("error", () => {});
  return { client, ping: () => client.ping(), close: () => client.disconnect() };
}
