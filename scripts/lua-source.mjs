// Reads a script from lua/, pasting in its `--!include lib/x.lua` fragments
// (helpers several operations share); each script stays one atomic operation.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const luaRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "lua");

export function luaSource(path) {
  return readFileSync(join(luaRoot, path), "utf8").replace(/^--!include (\S+)\n/gm, (_, included) => luaSource(included));
}
