/**
 * The list of test projects. vitest 5 no longer reads this file on its own:
 * `vitest.config.ts` imports it into `test.projects`.
 */
export const projects = [
  "packages/core",
  "packages/redis",
  "packages/documents",
  "packages/backends",
  "packages/http",
  "packages/server",
  "packages/testkit",
  "examples"
]
