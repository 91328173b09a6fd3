import { LeaseholdError } from "../errors/index.js";

/** A failure the command reports as one line, with its exit code: 1 (it failed), 2 (it was called wrong). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}

/** Any error as the one line the command prints (without the "leasehold: " the caller adds). */
export function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // leasehold's own errors already start with "leasehold: ".
  const text = error instanceof LeaseholdError ? message.replace(/^leasehold: /, "") : message;
  return text.replace(/\s*\n\s*/g, " ");
}

/** The exit code of an error: a usage mistake (a validation of what was typed) is 2, anything else 1. */
export function exitCodeOf(error: unknown): 1 | 2 {
  if (error instanceof CliError) return error.exitCode;
  return error instanceof LeaseholdError && error.code === "ERR_LEASEHOLD_VALIDATION" ? 2 : 1;
}
