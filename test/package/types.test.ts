// The built package type-checks in a consumer under every module setting TypeScript users have:
// "module": "commonjs" (node10 resolution, which reads `typesVersions`, not `exports`; issue #27,
// defect 9), node16 from CommonJS and from ESM, and a bundler. Each consumer imports every entry
// point and uses it, against a copy of the package built as `npm run build` builds it.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");

/** Imports every entry point and uses something of each, so a type that failed to resolve is an error. */
const CONSUMER = `
import { lock, memoryStore, semaphore, type SemaphoreLease } from "leasehold";
import { type Store, redisStore } from "leasehold/store";
import { semaphore as expressSemaphore } from "leasehold/express";
import { leasehold, lock as fastifyLock } from "leasehold/fastify";
import { semaphore as honoSemaphore } from "leasehold/hono";
import { LeaseholdModule } from "leasehold/nestjs";
import { instrument } from "leasehold/opentelemetry";
import { collectMetrics } from "leasehold/prometheus";

const slots = semaphore({ client: memoryStore(), limit: 2 });
const held: Promise<SemaphoreLease | null> = slots.acquire("k");
const locks = lock({ client: memoryStore() });
const middleware: { close(): Promise<void> } = expressSemaphore("api", 2);
const hono: { close(): Promise<void> } = honoSemaphore("api", 2);
const fastify: { close(): Promise<void> } = fastifyLock("order", { key: (req) => (req.params as { id: string }).id });
// Declaration merging: the request carries its lease.
const signalOf = (request: import("fastify").FastifyRequest): AbortSignal | undefined => request.lease?.signal;
const module: unknown = LeaseholdModule.forRoot({});
const stops: (() => void)[] = [instrument(), collectMetrics()];
const store: Store = memoryStore();
export const used = [held, locks, middleware, hono, fastify, leasehold, signalOf, module, stops, store, redisStore];
`;

/** The consumers: a file name (its extension picks CommonJS or ESM under node16) and the compiler options. */
const PROFILES: [string, string, ts.CompilerOptions][] = [
  [
    "commonjs (node10)",
    "consumer.ts",
    { module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10, ignoreDeprecations: "6.0" },
  ],
  ["node16 from CommonJS", "consumer.cts", { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }],
  ["node16 from ESM", "consumer.mts", { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }],
  ["bundler", "consumer.ts", { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }],
];

let consumers: string;

beforeAll(() => {
  // A folder of its own: node_modules/leasehold is the built package (its package.json and dist),
  // and every other package the repository has installed (the peers' types) is linked beside it.
  consumers = mkdtempSync(join(tmpdir(), "leasehold-consumers-"));
  const modules = join(consumers, "node_modules");
  const leasehold = join(modules, "leasehold");
  mkdirSync(leasehold, { recursive: true });
  for (const name of readdirSync(join(root, "node_modules"))) {
    if (!name.startsWith(".")) symlinkSync(join(root, "node_modules", name), join(modules, name));
  }
  copyFileSync(join(root, "package.json"), join(leasehold, "package.json"));
  execFileSync(process.execPath, ["scripts/build.mjs", join(leasehold, "dist")], { cwd: root, stdio: "pipe" });
}, 300_000);

afterAll(() => {
  if (consumers !== undefined) rmSync(consumers, { recursive: true, force: true });
});

describe("the package's entry points", () => {
  it("each subpath of exports has its typesVersions twin, pointing at the same CommonJS types", async () => {
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
      exports: Record<string, { require?: { types?: string } } | string>;
      typesVersions: { "*": Record<string, string[]> };
    };
    const subpaths = Object.entries(manifest.exports).filter(([name]) => name !== "." && name !== "./package.json");
    expect(subpaths.length).toBeGreaterThan(0);
    for (const [name, target] of subpaths) {
      const types = typeof target === "string" ? undefined : target.require?.types;
      expect(manifest.typesVersions["*"][name.slice(2)], name).toEqual([types]);
    }
  });
});

// Each program reads the peers' and Node's types afresh: seconds each on a busy machine.
describe("the package's types in a consumer", { timeout: 120_000 }, () => {
  it.each(PROFILES)("%s: every entry point resolves and type-checks", (_name, file, options) => {
    const dir = join(consumers, file.replace(/\./g, "-"));
    mkdirSync(dir, { recursive: true });
    const path = join(dir, file);
    writeFileSync(path, CONSUMER);
    const program = ts.createProgram([path], {
      ...options,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      esModuleInterop: true,
      types: ["node"],
      typeRoots: [join(consumers, "node_modules", "@types")],
    });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .map(
        (diagnostic) =>
          `${diagnostic.file?.fileName.slice(consumers.length) ?? ""}: TS${diagnostic.code} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`,
      );
    expect(problems).toEqual([]);
  });
});
