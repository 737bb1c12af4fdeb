/**
 * The Node version guard that runs before anything else: the bins and the library entries refuse
 * a Node older than `engines.node` with one line naming the version needed.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as NodeVersion from "../bin/node-version.mjs"

const bin = Path.join(import.meta.dirname, "..", "bin")
const manifest = JSON.parse(Fs.readFileSync(Path.join(import.meta.dirname, "..", "package.json"), "utf8")) as {
  engines: { node: string }
}

describe("A Node older than engines.node is refused with one line naming the version needed", () => {
  it("the minimum is the one in package.json", () => {
    expect(`>=${NodeVersion.minimum}`).toBe(manifest.engines.node)
  })

  it("20.20.2 and 22.18.0 are refused, 22.19.0, 23.0.0 and 24.10.0 pass", () => {
    expect(NodeVersion.refusal("20.20.2")).toBe(
      "tollgate needs Node >= 22.19; this is Node 20.20.2 (https://nodejs.org/en/download)"
    )
    expect(NodeVersion.refusal("22.18.0")).toContain("Node >= 22.19")
    for (const version of ["22.19.0", "23.0.0", "24.10.0"]) expect(NodeVersion.refusal(version)).toBeUndefined()
  })

  // The system's own Node, when it is an old one: what a fresh machine runs `pnpm start` with.
  const systemNode = "/usr/bin/node"
  const systemVersion = Fs.existsSync(systemNode)
    ? ChildProcess.execFileSync(systemNode, ["-p", "process.versions.node"]).toString().trim()
    : undefined
  const old = systemVersion !== undefined && NodeVersion.refusal(systemVersion) !== undefined
  it.skipIf(!old)(`an old Node (${systemVersion ?? "none at /usr/bin/node"}) running either bin prints the one line and exits 1`, () => {
    for (const entry of ["tollgate.mjs", "tollgate-cli.mjs"]) {
      const result = ChildProcess.spawnSync(systemNode, [Path.join(bin, entry)], { encoding: "utf8" })
      expect(result.status).toBe(1)
      expect(result.stdout).toBe("")
      expect(result.stderr).toBe(`${NodeVersion.refusal(systemVersion!)}\n`)
    }
  })

  // pnpm runs on the Node first on the PATH; engine-strict (.npmrc) makes it refuse the project's engines.
  const pnpm = (process.env["PATH"] ?? "").split(":").map((dir) => Path.join(dir, "pnpm")).find((file) => Fs.existsSync(file))
  it.skipIf(!old || pnpm === undefined)("pnpm start on an old Node exits 1 naming the version needed, before starting anything", () => {
    const result = ChildProcess.spawnSync(pnpm!, ["start"], {
      cwd: Path.join(import.meta.dirname, "..", "..", ".."),
      // PORT 0 is refused by the configuration: nothing could listen even if pnpm ran the script.
      env: { PATH: `${Path.dirname(systemNode)}:${process.env["PATH"] ?? ""}`, PORT: "0" },
      encoding: "utf8"
    })
    expect(result.status).toBe(1)
    expect(`${result.stdout}${result.stderr}`).toContain("Expected version: >=22.19")
    expect(`${result.stdout}${result.stderr}`).not.toContain("listening")
  })

  it.skipIf(!old)("an old Node importing the library entry fails with that line as the error", () => {
    const result = ChildProcess.spawnSync(systemNode, [
      "--input-type=module",
      "-e",
      `
      try { await import(${JSON.stringify(Path.join(bin, "require-node.mjs"))}) } catch (error) { console.log(error.message) }
    `
    ], { encoding: "utf8" })
    expect(result.stdout.trim()).toBe(NodeVersion.refusal(systemVersion!))
  })
})
