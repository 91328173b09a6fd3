// Builds dist/esm and dist/cjs with tsc (which keeps decorator metadata,
// unlike esbuild), and marks each folder's module format for Node and for
// TypeScript's reading of the .d.ts files beside the code.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";

rmSync("dist", { recursive: true, force: true });
const tsc = (project) => execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", project], { stdio: "inherit" });
tsc("tsconfig.build.json");
tsc("tsconfig.cjs.json");
for (const [folder, type] of [
  ["dist/esm", "module"],
  ["dist/cjs", "commonjs"],
]) {
  mkdirSync(folder, { recursive: true });
  writeFileSync(`${folder}/package.json`, `${JSON.stringify({ type }, null, 2)}\n`);
}
