import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "integrations/**/*.test.ts"],
    exclude: ["test/faults/**", "node_modules/**"],
    globalSetup: ["test/support/global-redis.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Timing-sensitive lease tests share two cores; fewer workers keep their margins honest.
    maxWorkers: 2,
  },
});
