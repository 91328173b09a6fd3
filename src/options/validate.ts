import { ValidationError } from "../errors/index.js";

/**
 * The longest id accepted, in characters. Longer ids are almost always a
 * request body or header used by mistake.
 *
 * @example
 * ```ts
 * const id = tenant.length <= MAX_ID_LENGTH - 7 ? `openai:${tenant}` : `openai:${sha256(tenant)}`;
 * ```
 */
export const MAX_ID_LENGTH = 1024;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A value as an error message shows it: strings quoted (and cut), objects by their kind. */
export function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === "function") return "a function";
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

/** Largest delay a Node.js timer can hold; a longer one fires after 1 ms instead (with a TimeoutOverflowWarning). */
export const MAX_MS = 2_147_483_647;

function wholeMs(option: string, value: unknown, min: number, fix: string): number {
  if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= MAX_MS) return value;
  throw new ValidationError(
    option,
    `\`${option}\` must be a whole number of milliseconds from ${min} to ${MAX_MS} (the longest a Node.js timer can wait), got ${show(value)}. ${fix}`,
  );
}

/** A whole number of milliseconds above zero that a timer can hold. */
export function positiveMs(option: string, value: unknown, fix: string): number {
  return wholeMs(option, value, 1, fix);
}

/** A whole number of milliseconds, 0 included, that a timer can hold: a wait or a pause, where 0 means none. */
export function delayMs(option: string, value: unknown, fix: string): number {
  return wholeMs(option, value, 0, fix);
}

/** A whole number at least `min`. */
export function integerAtLeast(option: string, value: unknown, min: number, fix: string): number {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= min) return value;
  const what = min === 0 ? "a non-negative integer" : `an integer of at least ${min}`;
  throw new ValidationError(option, `\`${option}\` must be ${what}, got ${show(value)}. ${fix}`);
}

/** A function or undefined. */
export function optionalFunction<T>(option: string, value: unknown): T | undefined {
  if (value === undefined || typeof value === "function") return value as T | undefined;
  throw new ValidationError(option, `\`${option}\` must be a function, got ${show(value)}.`);
}

/** `true`, `false` or undefined: a string such as `"false"` would otherwise read as true. */
export function optionalBoolean(option: string, value: unknown): boolean | undefined {
  if (value === undefined || typeof value === "boolean") return value;
  throw new ValidationError(option, `\`${option}\` must be true or false, got ${show(value)}.`);
}

/**
 * A key prefix: non-empty, printable, without the braces leasehold reserves
 * for the Redis Cluster hash tag, and without `:`, which separates it from
 * the kind and the id in the key (`{<prefix>:<kind>:<id>}`): the prefix ends at
 * the first `:`, so every (prefix, kind, id) has keys of its own.
 */
export function prefix(value: unknown): string {
  if (typeof value === "string" && value.length > 0 && value.length <= 256 && !/[{}:]/.test(value) && !CONTROL.test(value)) {
    return value;
  }
  if (typeof value === "string" && value.includes(":")) {
    throw new ValidationError(
      "prefix",
      `\`prefix\` must not contain ":", got ${show(value)}: leasehold puts ":" between the prefix and the id, so prefix "api:v2" with id "x" would share its keys with prefix "api" and id "v2:x". Use "-" or "." instead, e.g. "myapp-locks".`,
    );
  }
  throw new ValidationError(
    "prefix",
    `\`prefix\` must be a non-empty string of at most 256 printable characters without "{" or "}" (leasehold adds those as the Redis Cluster hash tag) or ":", got ${show(value)}.`,
  );
}

/** A tenant: a non-empty printable string of at most 256 characters (it travels in lease tokens and store keys' members). */
export function tenant(value: unknown): string {
  if (typeof value === "string" && value.length > 0 && value.length <= 256 && !CONTROL.test(value)) return value;
  throw new ValidationError(
    "tenant",
    `\`tenant\` must be a non-empty string of at most 256 printable characters naming who the call is for (e.g. "acme"), got ${show(value)}.`,
  );
}

/** An id to lease: a non-empty printable string of at most MAX_ID_LENGTH characters. */
export function id(value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new ValidationError(
      "id",
      `the id must be a non-empty string naming what is limited (e.g. "openai" or "order:42"), got ${show(value)}.`,
    );
  }
  if (value.length > MAX_ID_LENGTH) {
    throw new ValidationError(
      "id",
      `the id is ${value.length} characters long; at most ${MAX_ID_LENGTH} are allowed. Derive a short id (a tenant id, a hash) instead of passing request data.`,
    );
  }
  if (CONTROL.test(value)) {
    throw new ValidationError("id", `the id ${show(value)} contains control characters; use printable characters only.`);
  }
  return value;
}

/**
 * Refuses option names that are not known, so a typo (`leseMs`) fails loudly
 * instead of silently falling back to a default.
 */
export function knownOptions(options: object, known: readonly string[], where: string): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name) || (options as Record<string, unknown>)[name] === undefined) continue;
    const near = known.find((candidate) => closeTo(candidate, name));
    const hint = near === undefined ? `Known options: ${known.join(", ")}.` : `Did you mean \`${near}\`?`;
    throw new ValidationError(name, `unknown option \`${name}\` for ${where}. ${hint}`);
  }
}

/** Within two edits, case ignored: enough to catch a typo. */
function closeTo(a: string, b: string): boolean {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  if (Math.abs(x.length - y.length) > 2) return false;
  let previous = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const row = [i];
    for (let j = 1; j <= y.length; j++) {
      row[j] = Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return (previous[y.length] ?? 3) <= 2;
}

/** An options argument: an object or undefined. */
export function optionsObject(value: unknown, where: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  throw new ValidationError("options", `the options of ${where} must be an object, got ${show(value)}.`);
}
