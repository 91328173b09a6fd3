#!/usr/bin/env node
/**
 * The `leasehold` command: who holds an id, and freeing a holder stuck by a
 * bug, as its expiry would. `leasehold --help` says how.
 */
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { id as checkId, prefix as checkPrefix } from "../options/validate.js";
import { storeKey } from "../store/contract/keys.js";
import type { Store } from "../store/contract/types.js";
import { type Connection, connect, redisUrl } from "./connect.js";
import { CliError, exitCodeOf, oneLine } from "./errors.js";
import { duration, type HolderRow, otherKind, read, summary, type Target, TOKEN_SHOWN, text } from "./report.js";

const USAGE = `Usage: leasehold <command> <id> [options]

Commands:
  inspect <id>   who holds the id (token, owner, age, expires in, weight, tenant) and who waits, in turn
  release <id>   free a holder (--token) or every holder (--all) the way its expiry would: waiters
                 are granted, and the holder learns of the loss at its next renewal
  watch <id>     inspect again every second, until Ctrl-C

Options:
  --url <url>        redis://[user:password@]host:port[/db], or rediss:// for TLS
                     (default: $REDIS_URL, then redis://127.0.0.1:6379)
  --kind <kind>      semaphore (default) or lock
  --prefix <prefix>  the prefix the semaphore or lock was made with (default: the kind)
  --json             inspect, watch: JSON (watch: one reading per line)
  --token <token>    release: the holder's token, or its beginning as inspect shows it
  --all              release: every holder of the id; waiters stay queued and are granted
  --yes              release --all: do not ask for confirmation
  --interval <ms>    watch: between readings (default: 1000)
  -h, --help         this text

Exit status: 0 done (an id with nothing held or waiting too), 1 failed, 2 called wrong.`;

const OPTIONS = {
  url: { type: "string" },
  kind: { type: "string" },
  prefix: { type: "string" },
  json: { type: "boolean" },
  token: { type: "string" },
  all: { type: "boolean" },
  yes: { type: "boolean" },
  interval: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Which options each command takes, beside --url, --kind and --prefix. */
const TAKES: Record<string, readonly string[]> = {
  inspect: ["json"],
  release: ["token", "all", "yes"],
  watch: ["json", "interval"],
};

type Values = { [Name in keyof typeof OPTIONS]?: (typeof OPTIONS)[Name]["type"] extends "string" ? string : boolean };

/** Runs the command line `argv` (without node and the script); resolves the exit status. */
async function main(argv: readonly string[]): Promise<number> {
  try {
    const { command, values, target } = parse(argv);
    if (command === "help") {
      console.log(USAGE);
      return 0;
    }
    const connection = await connect(redisUrl(values.url), command === "watch");
    try {
      if (command === "inspect") return await inspect(connection.store, target, values.json === true);
      if (command === "release") return await release(connection.store, target, values);
      return await watch(connection, target, values.json === true, interval(values.interval));
    } finally {
      connection.close();
    }
  } catch (error) {
    console.error(`leasehold: ${oneLine(error)}`);
    return exitCodeOf(error);
  }
}

function parse(argv: readonly string[]): { command: string; values: Values; target: Target } {
  let parsed: { values: Values; positionals: string[] };
  try {
    // A token may start with "-" (base64url): take the word after --token as its value, whatever it is.
    const args = argv.flatMap((arg, i) =>
      argv[i - 1] === "--token" ? [] : arg === "--token" && i + 1 < argv.length ? [`--token=${argv[i + 1]}`] : [arg],
    );
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    throw new CliError(`${oneLine(error).replace(/ To specify a positional argument.*$/, "")} Run leasehold --help.`, 2);
  }
  const { values, positionals } = parsed;
  const [command, id, ...extra] = positionals;
  const none = { kind: "semaphore", id: "", prefix: "", key: "" } as const;
  if (values.help === true || command === "help") return { command: "help", values, target: none };
  if (command === undefined) throw new CliError(`a command is needed: inspect, release or watch. Run leasehold --help.`, 2);
  const takes = TAKES[command];
  if (takes === undefined)
    throw new CliError(`unknown command ${JSON.stringify(command)}: inspect, release or watch. Run leasehold --help.`, 2);
  if (id === undefined) throw new CliError(`${command} needs the id, e.g. leasehold ${command} openai.`, 2);
  if (extra.length > 0)
    throw new CliError(`${command} takes one id, got also ${extra.map((e) => JSON.stringify(e)).join(" ")}.`, 2);
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && !["url", "kind", "prefix", "help", ...takes].includes(name)) {
      throw new CliError(`--${name} does not apply to ${command}. Run leasehold --help.`, 2);
    }
  }
  const kind = values.kind ?? "semaphore";
  if (kind !== "semaphore" && kind !== "lock")
    throw new CliError(`--kind must be semaphore or lock, got ${JSON.stringify(kind)}.`, 2);
  const prefix = checkPrefix(values.prefix ?? kind);
  checkId(id);
  const other = kind === "lock" ? "semaphore" : "lock";
  const otherPrefix = values.prefix ?? other;
  return {
    command,
    values,
    target: {
      kind,
      id,
      prefix,
      key: storeKey(prefix, kind, id),
      other: { kind: other, id, prefix: otherPrefix, key: storeKey(otherPrefix, other, id) },
    },
  };
}

function interval(value: string | undefined): number {
  if (value === undefined) return 1000;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 100 || ms > 3_600_000) {
    throw new CliError(`--interval must be a whole number of ms from 100 to 3600000, got ${JSON.stringify(value)}.`, 2);
  }
  return ms;
}

async function inspect(store: Store, target: Target, json: boolean): Promise<number> {
  const report = await read(store, target);
  console.log(json ? JSON.stringify(report, null, 2) : text(report));
  return 0;
}

async function release(store: Store, target: Target, values: Values): Promise<number> {
  const { token, all } = values;
  if ((token === undefined) === (all !== true)) {
    throw new CliError("release needs --token <token> (one holder) or --all (every holder), not both.", 2);
  }
  if (values.yes === true && all !== true) throw new CliError("--yes goes with --all: releasing one --token does not ask.", 2);
  // An empty token is the beginning of every token: it would free the one holder there is.
  if (token !== undefined && token.trim() === "") {
    throw new CliError("--token needs the holder's token, or its beginning as inspect shows it; got an empty one.", 2);
  }
  const report = await read(store, target);
  const name = `${target.kind} ${JSON.stringify(target.id)}`;
  let chosen: HolderRow[];
  if (token !== undefined) {
    chosen = report.holders.filter((holder) => holder.token.startsWith(token));
    if (chosen.length === 0) {
      const hint =
        report.heldAs === undefined
          ? `it was released or lapsed (leasehold inspect ${target.id} shows who holds it)`
          : `nothing is held as a ${target.kind}; ${otherKind(report.heldAs)}`;
      throw new CliError(`no holder of ${name} has a token starting with ${JSON.stringify(token)}: ${hint}.`);
    }
    if (chosen.length > 1 && !chosen.some((holder) => holder.token === token)) {
      throw new CliError(
        `${chosen.length} holders of ${name} have tokens starting with ${JSON.stringify(token)}: give more of it.`,
        2,
      );
    }
    chosen = chosen.filter((holder) => holder.token === token || chosen.length === 1);
  } else {
    chosen = report.holders;
    if (chosen.length === 0) {
      console.log(`${summary(report)} Nothing to release.`);
      return 0;
    }
    if (values.yes !== true) {
      await confirm(`Release all ${count(chosen.length, "holder")} of ${name} (${count(report.used, "permit")} held)?`);
    }
  }
  for (const holder of chosen) {
    const live =
      target.kind === "lock"
        ? await store.lock.release({ storeKey: target.key, token: holder.token })
        : await store.semaphore.release({ storeKey: target.key, token: holder.token });
    const who = `${holder.token.slice(0, TOKEN_SHOWN)} (${holder.owner ?? "unknown owner"}${holder.ageMs === undefined ? "" : `, held ${duration(holder.ageMs)}`})`;
    console.log(live ? `released ${who}: it learns of the loss at its next renewal.` : `${who} had already ended.`);
  }
  console.log(summary(await read(store, target)));
  return 0;
}

/** Asks on the terminal; without one, refuses: --yes must say it. */
async function confirm(question: string): Promise<void> {
  if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
    throw new CliError(`${question.replace(/\?$/, "")}: pass --yes to confirm (there is no terminal to ask on).`, 2);
  }
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await prompt.question(`${question} Waiters stay queued and are granted. [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError("nothing released.");
  } finally {
    prompt.close();
  }
}

/** Reads every `everyMs` until SIGINT or SIGTERM; a failed reading is shown, and the next one tried. */
async function watch(connection: Connection, target: Target, json: boolean, everyMs: number): Promise<number> {
  const screen = process.stdout.isTTY === true && !json;
  // The first reading fails the command (a wrong URL, a refused ACL): nothing to watch.
  let report = await read(connection.store, target);
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = resolve;
  });
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  for (;;) {
    if (json) console.log(JSON.stringify(report));
    else {
      const body = `${text(report)}\n\n${new Date(report.at).toISOString()} · every ${duration(everyMs)} · Ctrl-C to stop`;
      process.stdout.write(screen ? `\x1b[H\x1b[2J${body}\n` : `${body}\n\n`);
    }
    const next = await Promise.race([stopped.then(() => undefined), sleep(everyMs).then(() => true)]);
    if (next === undefined) return 0;
    try {
      report = await read(connection.store, target);
    } catch (error) {
      // Redis went away, or a failover: say so, and keep trying.
      console.error(`leasehold: ${oneLine(error)} (retrying every ${duration(everyMs)})`);
    }
  }
}

const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? "" : "s"}`;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// A reader that goes away (`leasehold watch … | head`) ends the command: there is nowhere left to
// show anything, and that is how a pipeline says it has read enough.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  console.error(`leasehold: cannot write the output: ${oneLine(error)}`);
  process.exit(1);
});

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
