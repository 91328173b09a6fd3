import { StorePermissionError } from "../../errors/index.js";

const FIX = 'docs/operations.md ("Least privilege") gives the whole ACL leasehold needs';

/** The ACL patterns that cover a store key `{<prefix>:<kind>:<id>}...`: keys and channels. */
function patternsOf(key: string | undefined): { keys: string; channels: string } {
  const prefix = key?.match(/^\{([^:}]*):/)?.[1];
  const base = prefix === undefined ? "{<prefix>:*" : `{${prefix}:*`;
  return { keys: `~${base}`, channels: `&${base}` };
}

/** The command a script calls on line `line` of its source (1-based, as Redis counts, shebang included). */
function commandOnLine(source: string | undefined, line: number): string | undefined {
  return source
    ?.split("\n")
    [line - 1]?.match(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/)?.[1]
    ?.toLowerCase();
}

/**
 * A Redis error that says the ACL refused something, as a
 * {@link StorePermissionError} that names it and the fix; `undefined` for any
 * other error. `script`: the script that ran (its source maps the line Redis
 * names to the command refused); `key`: the first key it was given.
 */
export function permissionError(
  error: unknown,
  script?: { name: string; source: string },
  key?: string,
): StorePermissionError | undefined {
  const said = error instanceof Error ? error.message : typeof error === "string" ? error : undefined;
  if (said === undefined) return undefined;
  const { keys, channels } = patternsOf(key);
  const where = script === undefined ? "" : ` (in the script ${script.name})`;
  // A command the user may not run at all: "NOPERM ... run the 'evalsha' command".
  const direct = said.match(/NOPERM .*run the '([^']+)' command/);
  if (direct?.[1] !== undefined) {
    const command = direct[1].toLowerCase();
    return new StorePermissionError(
      command,
      `the Redis user may not run ${command.toUpperCase()}${where}. Grant it: ACL SETUSER <user> +${command}; ${FIX}. Redis said: ${said}`,
      error,
    );
  }
  // A command a script calls: "... can't run this command or subcommand script: <sha>, on @user_script:<line>."
  const inScript = said.match(/can't run this command.*@user_script:(\d+)/);
  if (inScript?.[1] !== undefined) {
    const command = commandOnLine(script?.source, Number(inScript[1])) ?? "unknown";
    const what = command === "unknown" ? "a command its scripts call" : command.toUpperCase();
    return new StorePermissionError(
      command,
      `the Redis user may not run ${what}${where}. Grant it: ACL SETUSER <user> +${command === "unknown" ? "<command>" : command}; ${FIX}. Redis said: ${said}`,
      error,
    );
  }
  if (/NOPERM.*channel|can't publish to the channel/.test(said)) {
    return new StorePermissionError(
      "channels",
      `the Redis user may not use the channel ${key === undefined ? "of this id" : `${key}:ch`}${where}: the waiting room announces grants on it. Grant it: ACL SETUSER <user> ${channels}; ${FIX}. Redis said: ${said}`,
      error,
    );
  }
  if (/NOPERM.*key|can't access .*key/.test(said)) {
    return new StorePermissionError(
      "keys",
      `the Redis user may not access the key ${key ?? "of this id"}${where}. Grant its prefix: ACL SETUSER <user> ${keys}; ${FIX}. Redis said: ${said}`,
      error,
    );
  }
  return undefined;
}
