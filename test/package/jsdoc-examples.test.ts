// Every export of the engine's entry point declared by the engine itself (not the stores', which
// their own modules document) carries JSDoc with an example, as test/package/docs-snippets.test.ts asks of the adapters.
import { join, resolve } from "node:path";
import ts from "typescript";
import { expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");

it("every engine export of leasehold has JSDoc with an example", () => {
  const entry = join(root, "src/index.ts");
  const program = ts.createProgram([entry], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(entry) as ts.SourceFile) as ts.Symbol;
  const missing: string[] = [];
  for (const exported of checker.getExportsOfModule(module)) {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    const declaredIn = symbol.declarations?.[0]?.getSourceFile().fileName ?? "";
    if (/\/src\/store\/(contract|memory|redis)\//.test(declaredIn)) continue;
    if (!symbol.getJsDocTags(checker).some((tag) => tag.name === "example")) missing.push(exported.name);
  }
  expect(missing).toEqual([]);
}, 60_000);
