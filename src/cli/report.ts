import { byAge, holderOf } from "../lease/owner.js";
import type { Holder } from "../lease/types.js";
import type { Inspection, Store } from "../store/contract/types.js";

/** What the command looks at: one id of one kind under one prefix, and its store key. */
export interface Target {
  kind: "semaphore" | "lock";
  id: string;
  prefix: string;
  key: string;
  /**
   * The same id as the other kind (under the same `--prefix`, or that kind's
   * default): read when this one has nothing, to tell a wrong `--kind`.
   */
  other?: Target;
}

/** A holder as the command reports it: the API's {@link Holder}, with its figures against the reading's clock. */
export interface HolderRow extends Holder {
  /** Ms since it was acquired (absent when its token does not say). */
  ageMs?: number;
  expiresInMs: number;
}

/** A waiter, in the order it will be served. */
export interface WaiterRow {
  position: number;
  token: string;
  owner?: string;
  /** When it started waiting (its call began), ms since the epoch. */
  acquiredAt?: number;
  waitedMs?: number;
  weight: number;
  tenant?: string;
}

/** One reading of an id: what `inspect` prints and `watch` refreshes. */
export interface Report {
  kind: Target["kind"];
  id: string;
  prefix: string;
  key: string;
  /** When it was read, ms since the epoch. */
  at: number;
  /**
   * A semaphore's limit, as the newest lease or waiter was taken under (the
   * store keeps none of its own); null when none says. 1 for a lock.
   */
  limit: number | null;
  /** Permits held (a lock: 1 when held). */
  used: number;
  holders: HolderRow[];
  waiting: WaiterRow[];
  /** When nothing is held or waiting as this kind: the other kind, if it holds the id (a wrong `--kind`). */
  heldAs?: Target["kind"];
}

/** Who holds and who waits as `target`'s kind: one script, no writes. */
function inspect(store: Store, target: Target): Promise<Inspection> {
  return target.kind === "lock"
    ? store.lock.inspect({ storeKey: target.key })
    : store.semaphore.inspect({ storeKey: target.key });
}

/** Reads who holds and who waits: one script, no writes (two when nothing is there, to look at the other kind). */
export async function read(store: Store, target: Target): Promise<Report> {
  const seen = await inspect(store, target);
  const heldAs =
    seen.holders.length === 0 && seen.waiters.length === 0 && target.other !== undefined
      ? (await inspect(store, target.other)).holders.length > 0
        ? target.other.kind
        : undefined
      : undefined;
  const at = Date.now();
  const holders = seen.holders
    .map((entry): HolderRow => {
      const { token, owner, acquiredAt, expiresAt, ...rest } = holderOf(entry, at);
      return {
        token,
        ...(owner !== undefined && { owner }),
        ...(acquiredAt !== undefined && { acquiredAt, ageMs: Math.max(0, at - acquiredAt) }),
        expiresAt,
        expiresInMs: entry.expiresInMs,
        ...rest,
      };
    })
    .sort(byAge);
  const waiting = seen.waiters.map((entry, i): WaiterRow => {
    const { token, owner, acquiredAt, weight, tenant } = holderOf(entry, at);
    const row: WaiterRow = { position: i + 1, token, weight };
    if (owner !== undefined) row.owner = owner;
    if (acquiredAt !== undefined) {
      row.acquiredAt = acquiredAt;
      row.waitedMs = Math.max(0, at - acquiredAt);
    }
    if (tenant !== undefined) row.tenant = tenant;
    return row;
  });
  return {
    kind: target.kind,
    id: target.id,
    prefix: target.prefix,
    key: target.key,
    at,
    limit:
      target.kind === "lock"
        ? 1
        : limitOf(seen.holders.map((e) => holderOf(e, at)).concat(seen.waiters.map((e) => holderOf(e, at)))),
    used: holders.reduce((sum, holder) => sum + holder.weight, 0),
    holders,
    waiting,
    ...(heldAs !== undefined && { heldAs }),
  };
}

/** The limit the newest lease or waiter was taken under. */
function limitOf(entries: Holder[]): number | null {
  let newest: Holder | undefined;
  for (const entry of entries) {
    if (entry.limit === undefined) continue;
    if (newest === undefined || (entry.acquiredAt ?? 0) > (newest.acquiredAt ?? 0)) newest = entry;
  }
  return newest?.limit ?? null;
}

/** A duration as an operator reads it: 850ms, 12.4s, 3m05s, 2h03m. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is escaped
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/** Text from the store as a terminal may show it: control characters escaped, long values cut. */
function shown(text: string | undefined, width = 32): string {
  if (text === undefined) return "-";
  const safe = text.replace(CONTROL, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return safe.length > width ? `${safe.slice(0, width - 1)}…` : safe;
}

/** How much of a token the tables show: enough to tell holders apart and to pass to `release --token`. */
export const TOKEN_SHOWN = 10;

function table(rows: string[][]): string[] {
  const widths = (rows[0] ?? []).map((_, c) => Math.max(...rows.map((row) => (row[c] ?? "").length)));
  return rows.map((row) =>
    row
      .map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c] ?? 0)))
      .join("  ")
      .trimEnd(),
  );
}

/** The heading line of a reading. */
export function summary(report: Report): string {
  const name = `${report.kind} ${JSON.stringify(report.id)} (key ${report.key})`;
  const waiting = report.waiting.length === 0 ? "nobody waiting" : `${report.waiting.length} waiting`;
  if (report.holders.length === 0) {
    return report.heldAs === undefined
      ? `${name}: nothing held, ${waiting}.`
      : `${name}: nothing held as a ${report.kind}, ${waiting}; ${otherKind(report.heldAs)}.`;
  }
  if (report.kind === "lock") {
    const holder = report.holders[0] as HolderRow;
    const since = holder.ageMs === undefined ? "" : ` for ${duration(holder.ageMs)}`;
    return `${name}: held by ${shown(holder.owner ?? "an unknown owner")}${since}, expires in ${duration(holder.expiresInMs)}; ${waiting}.`;
  }
  const of = report.limit === null ? " (limit unknown)" : ` of ${report.limit}`;
  const holders = report.holders.length === 1 ? "1 holder" : `${report.holders.length} holders`;
  return `${name}: ${report.used}${of} permits used by ${holders}; ${waiting}.`;
}

/** What a reading says of the other kind holding its id: how to look at it instead. */
export function otherKind(kind: Target["kind"]): string {
  return `a ${kind} holds this id: pass --kind ${kind}`;
}

/** A reading as text: the heading, then the holders (oldest first) and the waiters (in turn). */
export function text(report: Report): string {
  const lines = [summary(report)];
  if (report.holders.length > 0) {
    lines.push("");
    const rows = [["HOLDER", "OWNER", "AGE", "EXPIRES IN", "WEIGHT", "TENANT"]];
    for (const h of report.holders) {
      rows.push([
        h.token.slice(0, TOKEN_SHOWN),
        shown(h.owner),
        h.ageMs === undefined ? "-" : duration(h.ageMs),
        duration(h.expiresInMs),
        String(h.weight),
        shown(h.tenant),
      ]);
    }
    lines.push(...table(rows));
  }
  if (report.waiting.length > 0) {
    lines.push("");
    const rows = [["WAITING", "TOKEN", "OWNER", "WAITED", "WEIGHT", "TENANT"]];
    for (const w of report.waiting) {
      rows.push([
        String(w.position),
        w.token.slice(0, TOKEN_SHOWN),
        shown(w.owner),
        w.waitedMs === undefined ? "-" : duration(w.waitedMs),
        String(w.weight),
        shown(w.tenant),
      ]);
    }
    lines.push(...table(rows));
  }
  return lines.join("\n");
}
