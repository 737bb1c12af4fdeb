/**
 * No import cycles, type-only imports included: madge reads every module of the packages and the
 * test helpers and fails with each cycle it finds. ESLint's cycle rules (import-x's and import's
 * `no-cycle`) skip an `import type` by design, and a type-only cycle still ties two modules
 * together: neither can be moved or split without the other. Effect's repository checks the same
 * way (`scripts/circular.mjs`), counting values only.
 */
import madge from "madge"
import * as Path from "node:path"

const root = Path.join(import.meta.dirname, "..")

const result = await madge(["packages", "bench", "examples"].map((folder) => Path.join(root, folder)), {
  fileExtensions: ["ts"],
  excludeRegExp: [/node_modules/, /[/\\]dist[/\\]/, /[/\\]fixtures[/\\]/],
  detectiveOptions: { ts: { skipTypeImports: false }, es6: { skipTypeImports: false } }
})
const cycles = result.circular()
if (cycles.length > 0) {
  console.error(`${cycles.length} import cycle(s), type-only imports counted:`)
  for (const cycle of cycles) console.error(`  ${[...cycle, cycle[0]].join(" -> ")}`)
  process.exit(1)
}
console.log(`No import cycles in ${Object.keys(result.obj()).length} modules (type-only imports counted).`)
