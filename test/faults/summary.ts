import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Row } from "./report.js";

const folder = new URL("./report/", import.meta.url);

/** Global set-up: forget the previous run's rows. Teardown: print the table and write summary.json. */
export default function setup(): () => void {
  for (const name of readdirSync(folder)) if (name.endsWith(".json")) rmSync(new URL(name, folder));
  return () => {
    const rows = readdirSync(folder)
      .filter((name) => name.endsWith(".json") && name !== "summary.json")
      .map((name) => JSON.parse(readFileSync(new URL(name, folder), "utf8")) as Row)
      .sort((a, b) => a.scenario.localeCompare(b.scenario, undefined, { numeric: true }));
    writeFileSync(new URL("summary.json", folder), `${JSON.stringify({ rows }, null, 2)}\n`);
    const header = ["scenario", "operations", "max holders", "declared losses", "leaks", "verdict"];
    const cells = rows.map((row) => [
      row.scenario,
      String(row.operations),
      String(row.maxHolders),
      String(row.declaredLosses),
      String(row.leaks),
      row.verdict,
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] as string).length)));
    const line = (c: string[]) => c.map((cell, i) => cell.padEnd(widths[i] as number)).join("  ");
    console.log(`\n${line(header)}\n${widths.map((w) => "-".repeat(w)).join("  ")}\n${cells.map(line).join("\n")}\n`);
  };
}
