import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@tollgate/testkit",
    include: ["test/**/*.test.ts"],
    // These tests spawn the shipped server, which takes seconds to start on a loaded machine.
    testTimeout: 90_000,
    hookTimeout: 150_000
  }
})
