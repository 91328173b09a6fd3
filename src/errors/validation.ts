import { LeaseholdError } from "./base.js";

/**
 * Bad input: an option, an id or a call argument that cannot work. Thrown
 * before any slot is taken, so nothing needs cleaning up. `option` names what
 * to change.
 *
 * @example
 * ```ts
 * semaphore({ limit: 0 }); // ValidationError: `limit` must be a positive integer, got 0. ...
 * ```
 */
export class ValidationError extends LeaseholdError {
  /** The option or argument at fault, e.g. `"limit"` or `"heartbeatMs"`. */
  readonly option: string;

  constructor(option: string, message: string) {
    super("ERR_LEASEHOLD_VALIDATION", `leasehold: ${message}`);
    this.option = option;
  }
}

/** An engine validation message without its `leasehold: ` prefix, to quote inside an adapter's own. */
export function unprefixed(error: unknown): string {
  return (error as Error).message.replace(/^leasehold: /, "");
}
