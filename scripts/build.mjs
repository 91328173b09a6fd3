// Builds dist/esm and dist/cjs with tsc (which keeps decorator metadata,
// unlike esbuild), and marks each folder's module format for Node and for
// TypeScript's reading of the .d.ts files beside the code. An argument builds
// into another folder instead of dist (test/package/types.test.ts builds a
// copy of the package to type-check consumers against).
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";

const out = process.argv[2] ?? "dist";
rmSync(out, { recursive: true, force: true });
const tsc = (project, outDir) =>
  execFileSync(process.execPath, ["node_modules/typescript/bin/tsc", "-p", project, "--outDir", outDir], { stdio: "inherit" });
tsc("tsconfig.build.json", `${out}/esm`);
tsc("tsconfig.cjs.json", `${out}/cjs`);
for (const [folder, type] of [
  [`${out}/esm`, "module"],
  [`${out}/cjs`, "commonjs"],
]) {
  mkdirSync(folder, { recursive: true });
  writeFileSync(`${folder}/package.json`, `${JSON.stringify({ type }, null, 2)}\n`);
}
