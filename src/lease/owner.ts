import { hostname } from "node:os";
import { ValidationError } from "../errors/index.js";
import type { InspectedEntry } from "../store/contract/types.js";
import type { Holder } from "./types.js";

/**
 * The longest owner accepted, in characters. An owner travels in every store
 * call on its lease (inside the token), so it is a name, not a payload.
 *
 * @example
 * ```ts
 * const owner = requestId.slice(0, MAX_OWNER_LENGTH);
 * await locks.run("order:42", charge, { owner });
 * ```
 */
export const MAX_OWNER_LENGTH = 128;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * An owner: a non-empty string of printable characters. Control characters
 * are refused so that an owner shown by `leasehold inspect` cannot rewrite
 * the operator's terminal.
 */
export function checkOwner(value: unknown): string {
  if (typeof value === "string" && value.length > 0 && value.length <= MAX_OWNER_LENGTH && !CONTROL.test(value)) {
    return value;
  }
  const got =
    typeof value === "string" ? `${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}` : typeof value;
  throw new ValidationError(
    "owner",
    `\`owner\` must be a non-empty string of at most ${MAX_OWNER_LENGTH} printable characters naming who holds the lease (e.g. a request id, or "worker-3:4312"), got ${got}.`,
  );
}

let processOwner: string | undefined;

/** `<hostname>:<pid>`, the hostname shortened (from its end) to fit MAX_OWNER_LENGTH. */
export function defaultOwner(): string {
  if (processOwner === undefined) {
    const pid = `:${process.pid}`;
    const host = hostname().replace(new RegExp(CONTROL, "g"), "") || "localhost";
    processOwner = `${host.slice(0, MAX_OWNER_LENGTH - pid.length)}${pid}`;
  }
  return processOwner;
}

const BASE36 = /^[0-9a-z]{1,11}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** A live entry of an inspection as a {@link Holder}, its end read against `now` (ms since the epoch). */
export function holderOf(entry: InspectedEntry, now: number): Holder {
  const { token, weight } = entry;
  const at = token.indexOf("@");
  const [, stamp, name, limit] = (at < 0 ? token : token.slice(0, at)).split(".");
  const stamped = stamp !== undefined && name !== undefined && BASE36.test(stamp) && BASE64URL.test(name);
  return {
    token,
    ...(stamped && { owner: Buffer.from(name, "base64url").toString("utf8"), acquiredAt: Number.parseInt(stamp, 36) }),
    expiresAt: now + entry.expiresInMs,
    weight,
    ...(at >= 0 && { tenant: token.slice(at + 1) }),
    ...(stamped && limit !== undefined && BASE36.test(limit) && { limit: Number.parseInt(limit, 36) }),
  };
}

/** Oldest first (by acquire time; tokens without one last), then by token: the same order on every store. */
export function byAge(a: Holder, b: Holder): number {
  const x = a.acquiredAt ?? Number.POSITIVE_INFINITY;
  const y = b.acquiredAt ?? Number.POSITIVE_INFINITY;
  if (x !== y) return x < y ? -1 : 1;
  return a.token < b.token ? -1 : a.token > b.token ? 1 : 0;
}
