import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@tollgate/examples",
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**"],
    testTimeout: 30_000
  }
})
