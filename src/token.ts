import { randomFillSync } from "node:crypto";

const TOKEN_BYTES = 16;
const POOL_TOKENS = 256;
const pool = Buffer.alloc(TOKEN_BYTES * POOL_TOKENS);
let poolOffset = pool.length;

/**
 * A fresh lease token: 128 bits from the system CSPRNG, so no other holder
 * can guess or collide with it. Random bytes are drawn 4 KiB at a time (one
 * call into the CSPRNG per 256 tokens, rather than one per token, which
 * would cost more than the rest of an in-memory acquire); every token still
 * uses its own fresh bytes.
 */
export function newToken(): string {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const token = pool.toString("base64url", poolOffset, poolOffset + TOKEN_BYTES);
  poolOffset += TOKEN_BYTES;
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
