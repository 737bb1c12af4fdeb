/**
 * The Node version tollgate runs on, checked before anything else loads. Plain JavaScript on
 * purpose: an older Node cannot load the TypeScript sources at all (it fails on the `.ts`
 * extension, or later inside undici), so the check must be a file every Node can run. The minimum
 * is read from `engines.node` in package.json, where it is written once.
 */
import { createRequire } from "node:module"

const engines = createRequire(import.meta.url)("../package.json").engines.node

/** The minimum as `[major, minor]`, from `engines.node` (`>=22.19`). */
const [minMajor, minMinor] = engines.replace(/^>=\s*/u, "").split(".").map(Number)

/** The minimum as people write it: `22.19`. */
export const minimum = `${minMajor}.${minMinor}`

/**
 * The one line that refuses `version` (a `process.versions.node` string), or undefined when it is
 * recent enough.
 */
export const refusal = (version) => {
  const [major, minor] = version.split(".").map(Number)
  const supported = major > minMajor || (major === minMajor && minor >= minMinor)
  return supported ? undefined : `tollgate needs Node >= ${minimum}; this is Node ${version} (https://nodejs.org/en/download)`
}

/** The bins' guard: on an older Node, prints the refusal and exits 1 before anything else loads. */
export const exitIfRefused = () => {
  const refused = refusal(process.versions.node)
  if (refused === undefined) return
  console.error(refused)
  process.exit(1)
}
