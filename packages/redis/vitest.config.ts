import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "@tollgate/redis",
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The files share one module graph per worker instead of evaluating effect, core and the Redis
    // client again for each of them: each starts and stops its own Redis, and no module keeps
    // state that another file reads.
    isolate: false
  }
})
