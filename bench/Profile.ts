/**
 * Reads a V8 CPU profile (`node --cpu-prof`) into where the time went: the functions with the most
 * self time, each with its file (the package, for a dependency) and share of the busy time, and the
 * same grouped by package, so a bench can say what a request spends its CPU on.
 */
import * as Fs from "node:fs"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}

interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** `node_modules/.pnpm/effect@4.1.0/node_modules/effect/src/x.ts` -> `effect`; a workspace file keeps its path. */
const where = (url: string): string => {
  if (url === "") return "(native)"
  const inModules = url.lastIndexOf("node_modules/")
  if (inModules !== -1) {
    const [scope, name] = url.slice(inModules + "node_modules/".length).split("/")
    return scope!.startsWith("@") ? `${scope}/${name}` : scope!
  }
  const inPackages = url.indexOf("/packages/")
  return inPackages === -1 ? url.replace(/^file:\/\//, "") : url.slice(inPackages + 1)
}

const selfTimes = (file: string) => {
  const profile = JSON.parse(Fs.readFileSync(file, "utf8")) as CpuProfile
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<number, number>()
  // Idle time is the process waiting, not spending: left out, so shares are of the busy time.
  const idle = new Set(profile.nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id))
  profile.samples.forEach((id, i) => {
    if (!idle.has(id)) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  })
  let total = 0
  for (const us of self.values()) total += us
  return { byId, self, total }
}

/**
 * The `limit` functions with the most self time, then every package's share.
 *
 * @category reading
 */
export const heaviest = (file: string, limit: number): Array<Record<string, string>> => {
  const { byId, self, total } = selfTimes(file)
  const functions = new Map<string, number>()
  const packages = new Map<string, number>()
  for (const [id, us] of self) {
    const { functionName, lineNumber, url } = byId.get(id)!.callFrame
    const place = where(url)
    const name = `${(functionName || "(anonymous)").slice(0, 60)} ${place}${url === "" ? "" : `:${lineNumber + 1}`}`
    functions.set(name, (functions.get(name) ?? 0) + us)
    const group = place.startsWith("packages/") ? place.split("/").slice(0, 2).join("/") : place
    packages.set(group, (packages.get(group) ?? 0) + us)
  }
  const rows = (entries: Map<string, number>, count: number, prefix: string) =>
    [...entries].sort((a, b) => b[1] - a[1]).slice(0, count).map(([name, us]) => ({
      "function (self time)": `${prefix}${name}`,
      ms: (us / 1000).toFixed(0),
      share: `${((100 * us) / total).toFixed(1)} %`
    }))
  return [...rows(functions, limit, ""), ...rows(packages, 8, "all of ")]
}
