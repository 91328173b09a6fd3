import { hostname } from "node:os";
import { ValidationError } from "./errors.js";
import type { InspectedEntry } from "./store/types.js";

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

/**
 * What follows the random part and the acquire time in a lease token:
 * `.<owner, base64url>` (a semaphore adds {@link limitTag}). Made once per
 * factory for its default owner; a call with its own owner makes its own.
 */
export function ownerTag(owner: string): string {
  return `.${Buffer.from(owner, "utf8").toString("base64url")}`;
}

/** A semaphore token's tag: the owner's, then `.<limit, base36>`, the limit the lease is taken under. */
export function limitTag(owner: string, limit: number): string {
  return `${owner}.${limit.toString(36)}`;
}

/** Wall-clock ms minus `performance.now()`, read again once a second (see `wallClock`). */
let offset = Date.now() - performance.now();
let syncedAt = performance.now();
/**
 * The wall clock at `now` (a `performance.now()` reading the caller already
 * made): reading `Date.now()` for every acquire costs as much as the rest of
 * an in-memory token, so the offset between the two clocks is read once a
 * second and a wall clock step shows within that second.
 */
function wallClock(now: number): number {
  if (now - syncedAt > 1000 || now < syncedAt) {
    offset = Date.now() - now;
    syncedAt = now;
  }
  return Math.floor(now + offset);
}

/**
 * What a token carries after its random part: `.<acquired at, ms since the
 * epoch, base36>` then the tag (`.<owner, base64url>`, a semaphore's
 * `.<limit, base36>`). One per factory for its defaults (and one per call
 * with an owner or limit of its own): it keeps the text of the last
 * millisecond it wrote, so the acquires of one millisecond share it and a
 * token is made with one concatenation.
 */
export class TokenTag {
  #ms = -1;
  #text = "";

  constructor(readonly tag: string) {}

  /** The suffix for a call that began at `startedAt` (`performance.now()`). */
  at(startedAt: number): string {
    const ms = wallClock(startedAt);
    if (ms !== this.#ms) {
      this.#ms = ms;
      this.#text = `.${ms.toString(36)}${this.tag}`;
    }
    return this.#text;
  }
}

/**
 * A lease token: `<random>.<acquired at, ms since the epoch, base36><tag>`,
 * then `@<tenant>` when the call has one. Every part is base64url or base36:
 * no space (a lock's value is "<token> <fence>"), no `~` (markers and a
 * heavier holder's further permits), no `@` before the tenant, no newline
 * (announcements): what the scripts parse stays as it was. `startedAt`: when
 * the call began, on the `performance.now()` clock.
 */
export function stampToken(random: string, tag: TokenTag, tenant: string | undefined, startedAt: number): string {
  const token = random + tag.at(startedAt);
  return tenant === undefined ? token : `${token}@${tenant}`;
}

/**
 * Who holds a lease, read from its token, as `holders(id)` and
 * `holder(id)` report it.
 *
 * @example
 * ```ts
 * for (const h of await slots.holders("openai")) {
 *   console.log(h.owner, `${Date.now() - (h.acquiredAt ?? Date.now())} ms`, h.weight);
 * }
 * ```
 */
export interface Holder {
  /** The lease's token; `leasehold release --token` takes it (or a unique prefix of it). */
  token: string;
  /**
   * Who took the lease: the `owner` option of the call or of its factory,
   * `<hostname>:<pid>` by default. Absent for a token that carries none
   * (taken by an older leasehold, or through a store directly).
   */
  owner?: string;
  /**
   * When the call that took the lease asked for it, in ms since the epoch, by
   * the clock of the process that took it (a caller that queued: when it
   * started waiting). Absent, as `owner`.
   */
  acquiredAt?: number;
  /** When the lease ends unless renewed, in ms since the epoch, by this process's clock (the store's figure, not the holder's). */
  expiresAt: number;
  /** Permits it holds (1 for a lock). */
  weight: number;
  /** The tenant its permits count against, when the call passed one. */
  tenant?: string;
  /** The limit a semaphore lease was taken under; absent for a lock. */
  limit?: number;
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
