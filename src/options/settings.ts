import { ValidationError } from "../errors/index.js";
import { type StoreSource, storeSource } from "../store/access/client.js";
import { StoreKeys } from "../store/contract/keys.js";
import { HEARTBEAT_SHARE, RETRY_DELAY_MS } from "./defaults.js";
import {
  prefix as checkPrefix,
  delayMs,
  integerAtLeast,
  knownOptions,
  optionalFunction,
  optionsObject,
  positiveMs,
} from "./validate.js";

/** The lease length option: `leaseMs` for a semaphore, `ttlMs` for a lock. */
export type LeaseOption = "leaseMs" | "ttlMs";

/** Resolved per-call settings. */
export interface CallSettings {
  leaseMs: number;
  retries: number;
  retryDelayMs: number;
  heartbeatMs: number | false;
  heartbeatExplicit: boolean;
  onRenewError: ((error: unknown) => void) | undefined;
  signal?: AbortSignal | undefined;
  waitMs: number;
  /** 0: unbounded. */
  maxQueue: number;
}

/** Factory-level configuration, validated once. */
export interface Defaults extends CallSettings {
  source: StoreSource;
  prefix: string;
  /** The store keys of ids under this prefix, made once each. */
  storeKeys: StoreKeys;
  kind: "semaphore" | "lock";
  leaseOption: LeaseOption;
  /** The settings of a call that passes no options, resolved once (settings are never mutated). */
  plain: { acquire: CallSettings; run: CallSettings };
}

const leaseFix = (leaseOption: LeaseOption): string =>
  `Pass how long a holder may keep its ${leaseOption === "leaseMs" ? "permit" : "lock"} without renewing, e.g. ${leaseOption}: 30000.`;

function heartbeat(value: unknown, leaseMs: number, kind: string, leaseOption: LeaseOption): number | false {
  if (value === false) return false;
  const ms = positiveMs(
    "heartbeatMs",
    value,
    "Pass the renewal interval, false to turn renewal off, or nothing for a quarter of the lease.",
  );
  if (ms * 2 > leaseMs) {
    throw new ValidationError(
      "heartbeatMs",
      `${kind} heartbeatMs must be at most half of ${leaseOption} (${leaseMs}), got ${ms}: the first renewal could come after the lease lapsed. Lower heartbeatMs to ${Math.floor(leaseMs / 2)} or less, or raise ${leaseOption}.`,
    );
  }
  return ms;
}

function abortSignal(value: unknown): AbortSignal | undefined {
  if (value === undefined || value instanceof AbortSignal) return value;
  throw new ValidationError(
    "signal",
    "`signal` must be an AbortSignal (e.g. from an AbortController, or AbortSignal.timeout(ms)).",
  );
}

const defaultHeartbeat = (leaseMs: number): number => Math.max(1, Math.floor(leaseMs * HEARTBEAT_SHARE));

const retryDelay = (value: unknown): number => delayMs("retryDelayMs", value, "Pass the pause between attempts in ms.");

/**
 * Validates the factory options common to both primitives. `closing`: the
 * factory's own signal (it aborts on `close()`), which every call that
 * passes no signal of its own runs under.
 */
export function resolveDefaults(
  options: Record<string, unknown>,
  kind: "semaphore" | "lock",
  leaseOption: LeaseOption,
  defaultLeaseMs: number,
  closing: AbortSignal,
): Defaults {
  const leaseMs =
    options[leaseOption] === undefined ? defaultLeaseMs : positiveMs(leaseOption, options[leaseOption], leaseFix(leaseOption));
  const heartbeatExplicit = options.heartbeatMs !== undefined;
  const prefix = options.prefix === undefined ? kind : checkPrefix(options.prefix);
  const defaults: Omit<Defaults, "plain"> = {
    kind,
    leaseOption,
    source: storeSource(options.client),
    prefix,
    storeKeys: new StoreKeys(prefix, kind),
    leaseMs,
    retries:
      options.retries === undefined
        ? 0
        : integerAtLeast("retries", options.retries, 0, "Pass how many more attempts to make when full; 0 fails fast."),
    retryDelayMs: options.retryDelayMs === undefined ? RETRY_DELAY_MS : retryDelay(options.retryDelayMs),
    heartbeatMs: heartbeatExplicit ? heartbeat(options.heartbeatMs, leaseMs, kind, leaseOption) : defaultHeartbeat(leaseMs),
    heartbeatExplicit,
    onRenewError: optionalFunction("onRenewError", options.onRenewError),
    signal: closing,
    ...waiting(options, { waitMs: 0, maxQueue: 0, retries: 0 }),
  };
  const plain = { acquire: resolveCall(defaults, {}, false), run: resolveCall(defaults, {}, true) };
  return { ...defaults, plain };
}

/**
 * Merges one call's options over the factory's, validating only what the
 * call passes. An explicit heartbeat (from either) is checked against the
 * effective lease, before any slot is taken.
 */
export function resolveCall(defaults: Omit<Defaults, "plain">, options: Record<string, unknown>, keeping: boolean): CallSettings {
  const { leaseOption, kind } = defaults;
  const lease = options[leaseOption];
  const leaseMs = lease === undefined ? defaults.leaseMs : positiveMs(leaseOption, lease, leaseFix(leaseOption));
  let heartbeatMs = defaults.heartbeatMs;
  let heartbeatExplicit = defaults.heartbeatExplicit;
  if (keeping && options.heartbeatMs !== undefined) {
    heartbeatExplicit = true;
    heartbeatMs = heartbeat(options.heartbeatMs, leaseMs, kind, leaseOption);
  } else if (heartbeatExplicit && lease !== undefined) {
    heartbeatMs = heartbeat(heartbeatMs, leaseMs, kind, leaseOption);
  } else if (!heartbeatExplicit) {
    heartbeatMs = defaultHeartbeat(leaseMs);
  }
  return {
    leaseMs,
    retries:
      options.retries === undefined
        ? defaults.retries
        : integerAtLeast("retries", options.retries, 0, "Pass how many more attempts to make when full; 0 fails fast."),
    retryDelayMs: options.retryDelayMs === undefined ? defaults.retryDelayMs : retryDelay(options.retryDelayMs),
    heartbeatMs,
    heartbeatExplicit,
    onRenewError:
      keeping && options.onRenewError !== undefined
        ? optionalFunction("onRenewError", options.onRenewError)
        : defaults.onRenewError,
    signal: options.signal === undefined ? defaults.signal : abortSignal(options.signal),
    ...waiting(options, defaults),
  };
}

/**
 * The waiting settings of a call over its defaults. Queueing and spinning are
 * two different answers to "full": asking for both is a mistake, named here.
 */
function waiting(
  options: Record<string, unknown>,
  defaults: { waitMs: number; maxQueue: number; retries: number },
): { waitMs: number; maxQueue: number } {
  const waitMs =
    options.waitMs === undefined
      ? defaults.waitMs
      : delayMs("waitMs", options.waitMs, "Pass the longest a caller may wait in the queue, in ms; 0 fails fast.");
  const maxQueue =
    options.maxQueue === undefined
      ? defaults.maxQueue
      : integerAtLeast("maxQueue", options.maxQueue, 1, "Pass the most callers that may wait on one id.");
  const retries = options.retries ?? defaults.retries;
  if (waitMs > 0 && typeof retries === "number" && retries > 0) {
    throw new ValidationError(
      options.waitMs !== undefined ? "waitMs" : "retries",
      "`waitMs` (a fair queue) and `retries` (a bounded spin) are two ways to wait; pass one of them. Prefer waitMs: it admits callers in order and adds no polling.",
    );
  }
  return { waitMs, maxQueue };
}

/**
 * Splits the two call forms, `factory(client, options)` and
 * `factory({ client, ...options })`, into one options object.
 */
export function factoryOptions(args: readonly unknown[], where: string, known: readonly string[]): Record<string, unknown> {
  let options: Record<string, unknown>;
  if (args.length >= 2) {
    const rest = optionsObject(args[1], where);
    if (rest.client !== undefined) {
      throw new ValidationError("client", `${where} got a client twice: as its first argument and as options.client. Pass one.`);
    }
    options = { ...rest, client: args[0] };
  } else {
    const first = args[0];
    const isClient =
      typeof first === "function" ||
      (typeof first === "object" &&
        first !== null &&
        ("evalsha" in first || "evalSha" in first || "then" in first || "lock" in first || "lockAcquire" in first));
    options = isClient ? { client: first } : optionsObject(first, where);
  }
  knownOptions(options, known, where);
  return options;
}
