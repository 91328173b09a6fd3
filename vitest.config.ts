import swc from "unplugin-swc";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // SWC compiles the NestJS decorators faithfully (legacy decorators with
  // metadata, as tsc emits them); the default transform would drop the metadata.
  plugins: [
    swc.vite({
      jsc: {
        parser: { syntax: "typescript", decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
        target: "es2022",
      },
    }),
  ],
  oxc: false,
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
