import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@tollgate/core",
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The files share one module graph per worker instead of evaluating effect and core again for
    // each of them: no file here keeps state at module level that another reads.
    isolate: false
  }
})
