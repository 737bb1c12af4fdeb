import { defineConfig } from "vitest/config"
import { projects } from "./vitest.workspace.ts"

export default defineConfig({
  test: {
    projects,
    // Request logs of passing tests are noise; a failing test still shows its output.
    silent: "passed-only"
  }
})
