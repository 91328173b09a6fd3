import type { ScriptClient } from "./clients.js";
import type { scripts } from "./lua.generated.js";
import { permissionError } from "./permissions.js";

/** The embedded scripts, by name; the model-based suite swaps in a build whose clock it sets. */
export type Scripts = { readonly [Name in keyof typeof scripts]: Script };
export type Script = { readonly name: string; readonly sha: string; readonly source: string };

/**
 * Runs a script by SHA, sending the source only when the server answers
 * NOSCRIPT (after a restart, a failover or SCRIPT FLUSH); EVAL caches it
 * again for the next call. Not an async function: almost every request makes
 * this call, and a `.catch` costs one promise where an async frame costs two.
 */
export function runScript(
  calls: ScriptClient,
  script: Script,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  let sent: Promise<unknown>;
  try {
    sent = calls.evalsha(script.sha, keys, args);
  } catch (error) {
    sent = Promise.reject(error);
  }
  return sent.catch((error: unknown) => {
    if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw refused(error, script, keys);
    return calls.eval(script.source, keys, args).catch((again: unknown) => {
      throw refused(again, script, keys);
    });
  });
}

/** An ACL that lacks a permission: say which, and how to grant it, rather than "failed". */
function refused(error: unknown, script: Script, keys: readonly string[]): unknown {
  return permissionError(error, script, keys[0]) ?? error;
}

/** A reply no script sends: the server answered, wrongly. */
export function unexpected(reply: unknown, script: Script): Error {
  const error = new Error(`unexpected reply ${JSON.stringify(reply)} from ${script.name}`);
  // The server answered, wrongly: not a sign that it is unreachable (see store/access/breaker.ts).
  error.name = "UnexpectedReply";
  return error;
}
