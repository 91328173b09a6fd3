import { randomFillSync } from "node:crypto";

/** Characters of a token's random part: 22 base64url characters, 132 random bits (decoding to 16 bytes). */
const TOKEN_CHARS = 22;
/** Bytes drawn at once: a multiple of 3, so every base64url character of the batch carries 6 fresh random bits. */
const POOL_BYTES = 4095;
const pool = Buffer.alloc(POOL_BYTES);
/** The pool's bytes as base64url (5,460 characters: 248 tokens), sliced one token at a time. */
let poolText = "";
let poolOffset = 0;

/**
 * A fresh lease token: 128 bits (and 4 more) from the system CSPRNG, so no
 * other holder can guess or collide with it. Random bytes are drawn 4 KiB at
 * a time and encoded at once (one call into the CSPRNG and one base64url
 * pass per 248 tokens: per token, either cost as much as the rest of an
 * in-memory acquire); a token is a slice of that text, so every token still
 * has its own fresh bits, none shared with another.
 */
export function newToken(): string {
  if (poolOffset + TOKEN_CHARS > poolText.length) {
    randomFillSync(pool);
    poolText = pool.toString("base64url");
    poolOffset = 0;
  }
  const token = poolText.slice(poolOffset, poolOffset + TOKEN_CHARS);
  poolOffset += TOKEN_CHARS;
  return token;
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
