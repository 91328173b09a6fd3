// Every ```ts block of the README and the guides type-checks against the sources, as a user's file
// would against the package: each block is a module of its own, importing `leasehold`,
// `leasehold/express` and the others, with the names the prose says stand for your code declared below.
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");
const documents = [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

/** What the snippets use without defining: a client made once, and your own code. */
const PRELUDE = `
import type { Redis } from "ioredis";
import type { Lock, Semaphore } from "leasehold";
declare global {
  const redis: Redis;
  const slots: Semaphore;
  const locks: Lock;
  const order: { id: string };
  const prompt: string;
  const req: Request;
  function callModel(input?: unknown, options?: { signal?: AbortSignal | undefined }): Promise<{ text: string }>;
  function charge(what: unknown, options?: { signal?: AbortSignal | undefined }): Promise<void>;
  function work(input?: unknown): Promise<void>;
  function build(options: { signal: AbortSignal }): Promise<unknown>;
  function computeTotal(id: number, options?: { signal?: AbortSignal | undefined }): Promise<number>;
  const db: { query(sql: string, values: unknown[]): Promise<{ rowCount: number | null }> };
}
export {};
`;

const ENTRY_POINTS: Record<string, string> = {
  leasehold: "src/index.ts",
  "leasehold/store": "src/store/index.ts",
  "leasehold/express": "integrations/express/index.ts",
  "leasehold/fastify": "integrations/fastify/index.ts",
  "leasehold/hono": "integrations/hono/index.ts",
  "leasehold/nestjs": "integrations/nestjs/index.ts",
  "leasehold/opentelemetry": "integrations/opentelemetry/index.ts",
  "leasehold/prometheus": "integrations/prometheus/index.ts",
};

interface Snippet {
  document: string;
  line: number;
  file: string;
  code: string;
}

function snippets(): Snippet[] {
  const found: Snippet[] = [];
  for (const document of documents) {
    const lines = readFileSync(join(root, document), "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
      if (lines[i]?.trim() !== "```ts") continue;
      const start = i + 1;
      let end = start;
      while (end < lines.length && lines[end]?.trim() !== "```") end++;
      const file = join(root, "test", "docs-snippets", `${document.replace(/[/.]/g, "-")}-${start + 1}.ts`);
      found.push({ document, line: start + 1, file, code: `${lines.slice(start, end).join("\n")}\nexport {};\n` });
      i = end;
    }
  }
  return found;
}

describe("the documentation's TypeScript snippets", () => {
  it("type-check against the sources, as a user's code would against the package", () => {
    const all = snippets();
    expect(all.length).toBeGreaterThan(10);
    const prelude = join(root, "test", "docs-snippets", "prelude.ts");
    const virtual = new Map<string, string>([[prelude, PRELUDE], ...all.map((snippet) => [snippet.file, snippet.code] as const)]);

    const config = ts.getParsedCommandLineOfConfigFile(
      join(root, "tsconfig.json"),
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
          throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
        },
      },
    );
    if (config === undefined) throw new Error("tsconfig.json could not be read");
    const options: ts.CompilerOptions = {
      ...config.options,
      noEmit: true,
      // Snippets show a call or two; a name they declare and leave unused is not a mistake.
      noUnusedLocals: false,
      noUnusedParameters: false,
      baseUrl: root,
      paths: Object.fromEntries(Object.entries(ENTRY_POINTS).map(([name, path]) => [name, [path]])),
    };
    const host = ts.createCompilerHost(options);
    const readFile = host.readFile.bind(host);
    const fileExists = host.fileExists.bind(host);
    const getSourceFile = host.getSourceFile.bind(host);
    host.readFile = (name) => virtual.get(name) ?? readFile(name);
    host.fileExists = (name) => virtual.has(name) || fileExists(name);
    host.getSourceFile = (name, language, ...rest) => {
      const text = virtual.get(name);
      return text === undefined ? getSourceFile(name, language, ...rest) : ts.createSourceFile(name, text, language);
    };

    const program = ts.createProgram([prelude, ...all.map((snippet) => snippet.file)], options, host);
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((diagnostic) => diagnostic.file !== undefined && virtual.has(diagnostic.file.fileName))
      .map((diagnostic) => {
        const file = diagnostic.file as ts.SourceFile;
        const snippet = all.find((candidate) => candidate.file === file.fileName);
        const { line } = file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
        const where = snippet === undefined ? "prelude" : `${snippet.document}:${snippet.line + line}`;
        return `${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`;
      });
    expect(problems).toEqual([]);
  }, 60_000);

  it("every export of the adapters and metrics entry points has JSDoc with an example", () => {
    const entries = Object.values(ENTRY_POINTS).filter((path) => path.startsWith("integrations/"));
    const program = ts.createProgram(
      entries.map((path) => join(root, path)),
      {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        experimentalDecorators: true,
        skipLibCheck: true,
      },
    );
    const checker = program.getTypeChecker();
    const missing: string[] = [];
    for (const entry of entries) {
      const module = checker.getSymbolAtLocation(program.getSourceFile(join(root, entry)) as ts.SourceFile) as ts.Symbol;
      for (const exported of checker.getExportsOfModule(module)) {
        const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        const declaredIn = symbol.declarations?.[0]?.getSourceFile().fileName ?? "";
        // The engine's own types (re-exported for convenience) are documented where they are declared.
        if (!declaredIn.includes("/integrations/")) continue;
        if (!symbol.getJsDocTags(checker).some((tag) => tag.name === "example")) missing.push(`${entry}: ${exported.name}`);
      }
    }
    expect(missing).toEqual([]);
  }, 60_000);
});
