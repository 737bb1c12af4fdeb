import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@tollgate/server",
    include: ["test/**/*.test.ts"],
    // These tests spawn the shipped server, which takes seconds to start on a loaded machine.
    testTimeout: 90_000,
    hookTimeout: 150_000,
    // A file's concurrent tests (each its own server process) run two at a time: one per core, so
    // each start takes as long as it would alone and no timeout is nearer than in a serial run.
    maxConcurrency: 2
  }
})
