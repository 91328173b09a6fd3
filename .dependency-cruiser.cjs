// The layers of leasehold, checked by `npm run check:layers` (part of `npm test`). Requests flow one way:
//
//   adapters (integrations/<framework>)  ->  HTTP core (integrations/http)  ->  engine (src/)
//   engine  ->  store contract (src/store/contract)  <-  stores (src/store/memory, src/store/redis)
//
// The engine is src/semaphore, lock, lease, acquire, options and observability, and src/store/access (its
// bounded calls, breaker and client resolution: the one place it makes a store). Beneath every layer:
// src/errors and src/runtime (shared timers, abort listeners), and options/validate.ts and defaults.ts.
// Type-only imports count as imports (tsPreCompilationDeps): a type cycle is a cycle.

/** What a store, the contract and the base may use of the rest of src/. */
const BASE = "^src/(errors|runtime)/|^src/options/(validate|defaults)[.]ts$";

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "No import cycle, type imports included: move the shared type or symbol to the module that owns it.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "no-orphans",
      comment: "Every module is imported by something, or is an entry point.",
      severity: "error",
      from: { orphan: true, pathNot: "^src/(store/)?index[.]ts$|^src/cli/main[.]ts$|^integrations/[^/]+/index[.]ts$" },
      to: {},
    },
    {
      name: "engine-not-integrations",
      comment: "Nothing in src/ knows the HTTP core or the adapters built over it.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^integrations/" },
    },
    {
      name: "entries-not-imported",
      comment: "The package entries are for users: modules import what they use from where it is defined.",
      severity: "error",
      from: {},
      to: { path: "^src/(store/)?index[.]ts$" },
    },
    {
      name: "cli-not-imported",
      comment: "The leasehold command is an application of the engine and the stores: nothing builds on it.",
      severity: "error",
      from: { pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "http-core-not-adapters",
      comment: "The HTTP core serves every framework and knows none of them.",
      severity: "error",
      from: { path: "^integrations/http/" },
      to: { path: "^integrations/", pathNot: "^integrations/http/" },
    },
    {
      name: "adapters-not-each-other",
      comment: "An adapter shares with another only through the HTTP core.",
      severity: "error",
      from: { path: "^integrations/([^/]+)/", pathNot: "^integrations/http/" },
      to: { path: "^integrations/", pathNot: "^integrations/($1|http)/" },
    },
    {
      name: "adapters-through-http-core",
      comment:
        "An adapter reaches the engine through the HTTP core: of src/ it may use only the public types, the errors, option checks, the embedded store's factory and the metrics.",
      severity: "error",
      from: { path: "^integrations/", pathNot: "^integrations/http/" },
      to: {
        path: "^src/",
        pathNot: `${BASE}|^src/(lease|options|store/access|store/memory)/types[.]ts$|^src/store/memory/index[.]ts$|^src/observability/`,
      },
    },
    {
      name: "http-core-not-stores",
      comment: "No integration talks to Redis, reads a Lua script or reaches past the engine into a store or its contract.",
      severity: "error",
      from: { path: "^integrations/" },
      to: {
        path: "^src/store/(contract|redis)/|^src/store/memory/(?!index[.]ts$|types[.]ts$)|^src/store/access/(?!types[.]ts$)|^lua/|node_modules/(ioredis|iovalkey|redis|@redis/[^/]+)/",
      },
    },
    {
      name: "engine-speaks-contract",
      comment:
        "The engine reaches a store through the contract, whichever store it is (a store in this process answers through it at once); only src/store/access makes one from a client.",
      severity: "error",
      from: { path: "^src/(semaphore|lock|lease|acquire|options|observability)/" },
      to: { path: "^src/store/(memory|redis)/" },
    },
    {
      name: "stores-not-engine",
      comment: "A store knows the contract and the base, never the engine, and never the other store.",
      severity: "error",
      from: { path: "^src/store/(memory|redis)/" },
      to: { path: "^src/", pathNot: `^src/store/($1|contract)/|${BASE}` },
    },
    {
      name: "contract-is-a-leaf",
      comment: "The store contract depends on nothing but the base.",
      severity: "error",
      from: { path: "^src/store/contract/" },
      to: { path: "^src/", pathNot: `^src/store/contract/|${BASE}` },
    },
    {
      name: "base-is-a-leaf",
      comment: "Errors, runtime helpers, option checks and defaults import nothing above them.",
      severity: "error",
      from: { path: BASE },
      to: { path: "^src/", pathNot: BASE },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default", "types"] },
  },
};
