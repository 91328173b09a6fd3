import { defineConfig } from "vitest/config";

// npm run test:faults: every scenario spawns its own redis-server(s) and worker processes.
export default defineConfig({
  test: {
    root: ".",
    include: ["test/faults/**/*.test.ts"],
    globalSetup: ["test/faults/summary.ts"],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Scenarios measure timing under load: one file at a time on two cores.
    fileParallelism: false,
  },
});
