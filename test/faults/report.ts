import { mkdirSync, writeFileSync } from "node:fs";
import type { Verdict } from "./history.js";

/** One row of the final table: a scenario and what the checker found. */
export interface Row {
  scenario: string;
  operations: number;
  maxHolders: number | "-";
  declaredLosses: number;
  leaks: number;
  verdict: "pass" | "FAIL";
  notes?: string;
}

const folder = new URL("./report/", import.meta.url);

/** Records a scenario's row (one JSON file each; the global teardown prints them all as a table). */
export function report(row: Row): void {
  mkdirSync(folder, { recursive: true });
  const name = row.scenario.replace(/[^\w]+/g, "-").toLowerCase();
  writeFileSync(new URL(`${name}.json`, folder), `${JSON.stringify(row, null, 2)}\n`);
}

export function rowFrom(scenario: string, verdict: Verdict, leaks: number, ok: boolean, notes?: string): Row {
  return {
    scenario,
    operations: verdict.operations,
    maxHolders: verdict.maxHolders,
    declaredLosses: verdict.declaredLosses,
    leaks,
    verdict: ok ? "pass" : "FAIL",
    ...(notes === undefined ? {} : { notes }),
  };
}
