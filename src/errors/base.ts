/**
 * Every error leasehold throws. Catch this to handle them all; check `code`
 * (stable across versions) rather than the message.
 *
 * @example
 * ```ts
 * try { await slots.run("openai", work); }
 * catch (error) { if (error instanceof LeaseholdError) log.warn(error.code); throw error; }
 * ```
 */
export class LeaseholdError extends Error {
  /** A stable, machine-readable name for the failure, e.g. `"ERR_LOCK_NOT_ACQUIRED"`. */
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/**
 * Makes an error without capturing a stack trace: for refusals the engine
 * makes for the HTTP adapters, and the adapters' own refusal exceptions. A
 * refusal is an answer, not a bug: its stack would only point into the
 * library, and capturing one was a large share of what refusing cost.
 * Internal: not exported by the package.
 *
 * @example
 * ```ts
 * const error = withoutStack(() => new LockNotAcquiredError("job", 1000));
 * ```
 */
export function withoutStack<E>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
