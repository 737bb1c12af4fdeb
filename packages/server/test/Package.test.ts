/**
 * What a user outside this repository gets, the way docs/embedding.md says: `pnpm pack:all` writes
 * the six tarballs, one `npm install` of all six puts them in a fresh ES module project in the
 * system's temp directory, and there an Express 5 app mounts tollgate under a prefix and makes a
 * paid call, and the `tollgate` bin serves in dev mode. Needs the npm registry for the third-party
 * dependencies.
 */
import { FreePort } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as NodeVersion from "../bin/node-version.mjs"

const root = Path.join(import.meta.dirname, "..", "..", "..")
const packages = ["core", "redis", "documents", "backends", "http", "server"] as const

const run = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<string>((resolve, reject) => {
    ChildProcess.execFile(command, args, { cwd, maxBuffer: 16 * 1024 * 1024, timeout: 240_000 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`${command} ${args.join(" ")} failed: ${stderr || error.message}`)))
  })

const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-package-"))
const tarballs = Path.join(root, "tarballs")
const project = Path.join(work, "project")
const dist = (name: string) => Path.join(root, "packages", name, "dist")
/** The packages without a build before this file ran, and the tarballs folder: removed after it. */
const unbuilt = packages.filter((name) => !Fs.existsSync(dist(name)))
const tarballsExisted = Fs.existsSync(tarballs)

beforeAll(async () => {
  const started = Date.now()
  const lap = (step: string) => console.log(`${step}: ${((Date.now() - started) / 1000).toFixed(1)} s`)
  await run("pnpm", ["-s", "pack:all"], root)
  lap("pnpm pack:all")
  Fs.mkdirSync(project)
  Fs.writeFileSync(Path.join(project, "package.json"), JSON.stringify({ name: "tollgate-install-check", private: true, type: "module" }))
  const files = Fs.readdirSync(tarballs).map((file) => Path.join(tarballs, file))
  await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...files, "express@^5.1.0"], project)
  lap("npm install")
  console.log(`tarballs: ${Fs.readdirSync(tarballs).join(", ")}`)
}, 300_000)

afterAll(async () => {
  await Fs.promises.rm(work, { recursive: true, force: true })
  await Promise.all(unbuilt.map((name) => Fs.promises.rm(dist(name), { recursive: true, force: true })))
  if (!tarballsExisted) await Fs.promises.rm(tarballs, { recursive: true, force: true })
}, 120_000)

describe("Every package packs to a tarball of built JavaScript, types and source maps, without tests", () => {
  it("the six tarballs exist with dist/ and a README, none holds a test, and the installed exports point at dist/", async () => {
    expect(Fs.readdirSync(tarballs).sort()).toEqual(packages.map((name) => `tollgate-${name}-0.1.0.tgz`).sort())
    for (const name of packages) {
      const files = (await run("tar", ["tzf", Path.join(tarballs, `tollgate-${name}-0.1.0.tgz`)], work)).split("\n")
      expect(files).toEqual(
        expect.arrayContaining(["package/dist/index.js", "package/dist/index.d.ts", "package/dist/index.js.map", "package/README.md"])
      )
      expect(files.filter((file) => file.includes("/test/") || file.endsWith(".test.ts"))).toEqual([])
      const installed = JSON.parse(Fs.readFileSync(Path.join(project, "node_modules", "@tollgate", name, "package.json"), "utf8"))
      expect(installed.exports["."].default).toBe("./dist/index.js")
      expect(installed.license).toBe("Apache-2.0")
    }
  })
})

describe("Installed with npm outside the workspace, tollgate embeds in Express 5 under a prefix and charges a paid call", () => {
  it("an Express app mounting Tollgate.make at /payments answers a chat completion with the dev key", async () => {
    Fs.writeFileSync(
      Path.join(project, "app.mjs"),
      `
import express from "express"
import { Tollgate } from "@tollgate/server"
const tollgate = await Tollgate.make({ basePath: "/payments", announce: false })
const app = express()
app.use("/payments", tollgate.nodeHandler)
const server = app.listen(0, "127.0.0.1", async () => {
  const url = "http://127.0.0.1:" + server.address().port + "/payments/api/v1/chat/completions"
  const call = () => fetch(url, {
    method: "POST",
    headers: { authorization: "Bearer " + tollgate.devCredentials.inferenceKey, "content-type": "application/json" },
    body: JSON.stringify({ model: "local-echo", messages: [{ role: "user", content: "hello" }] })
  })
  const first = await call()
  const second = await call()
  console.log(JSON.stringify({
    status: first.status,
    body: await first.json(),
    balanceBefore: first.headers.get("x-service-balance-usd"),
    balanceAfter: second.headers.get("x-service-balance-usd")
  }))
  server.close()
  await tollgate.dispose()
})
`
    )
    const output = await run(process.execPath, ["app.mjs"], project)
    // The app's request log may flush its last line after the result, so the result is found by its shape.
    const result = JSON.parse(output.trim().split("\n").findLast((line) => line.startsWith("{\"status\"")) ?? "{}") as {
      status: number
      body: { choices: ReadonlyArray<{ message: { content: string } }> }
      balanceBefore: string
      balanceAfter: string
    }
    expect(result.status).toBe(200)
    expect(result.body.choices[0]?.message.content).toBe("You said: hello")
    expect(Number(result.balanceAfter)).toBeLessThan(Number(result.balanceBefore))
  }, 60_000)

  // The system's own Node, when it is older than engines.node: what a fresh machine has.
  const oldNode = "/usr/bin/node"
  const oldVersion = Fs.existsSync(oldNode) ? ChildProcess.execFileSync(oldNode, ["-p", "process.versions.node"]).toString().trim() : "none"
  const tooOld = NodeVersion.refusal(oldVersion) !== undefined
  it.skipIf(!tooOld)(`on an older Node (${oldVersion} at /usr/bin/node) the bin and the import each refuse with one line`, async () => {
    const line = NodeVersion.refusal(oldVersion)!
    const bin = ChildProcess.spawnSync(oldNode, [Path.join(project, "node_modules", ".bin", "tollgate")], {
      cwd: project,
      encoding: "utf8"
    })
    expect([bin.status, bin.stdout, bin.stderr]).toEqual([1, "", `${line}\n`])
    const imported = ChildProcess.spawnSync(oldNode, [
      "--input-type=module",
      "-e",
      "import('@tollgate/server').then(() => console.log('loaded'), (error) => console.log(error.message))"
    ], { cwd: project, encoding: "utf8" })
    expect(imported.stdout).toBe(`${line}\n`)
  })

  it("the same app declares a paid endpoint of its own with Tollgate.endpoint, without Effect, charged 0.002 USD a call", async () => {
    Fs.writeFileSync(
      Path.join(project, "own.mjs"),
      `
import express from "express"
import { Tollgate } from "@tollgate/server"
const summarize = Tollgate.endpoint({
  path: "/v1/summarize",
  sku: "summarize",
  price: { usd: "0.002" },
  handle: async ({ body }) => ({ json: { summary: String(body.text).slice(0, 5) } })
})
const tollgate = await Tollgate.make({ endpoints: [summarize], announce: false })
const app = express()
app.post("/v1/summarize", tollgate.nodeHandler)
const server = app.listen(0, "127.0.0.1", async () => {
  const call = () => fetch("http://127.0.0.1:" + server.address().port + "/v1/summarize", {
    method: "POST",
    headers: { authorization: "Bearer " + tollgate.devCredentials.inferenceKey, "content-type": "application/json" },
    body: JSON.stringify({ text: "hello world" })
  })
  const first = await call()
  const second = await call()
  console.log(JSON.stringify({
    status: first.status,
    body: await first.json(),
    balanceBefore: first.headers.get("x-service-balance-usd"),
    balanceAfter: second.headers.get("x-service-balance-usd")
  }))
  server.close()
  await tollgate.dispose()
})
`
    )
    const output = await run(process.execPath, ["own.mjs"], project)
    const result = JSON.parse(output.trim().split("\n").findLast((line) => line.startsWith("{\"status\"")) ?? "{}") as {
      status: number
      body: unknown
      balanceBefore: string
      balanceAfter: string
    }
    expect(result).toEqual({ status: 200, body: { summary: "hello" }, balanceBefore: "25", balanceAfter: "24.998" })
  }, 60_000)

  it("the tollgate bin starts in dev mode, serves, and stops on SIGTERM", async () => {
    const port = await FreePort.freePort()
    const child = ChildProcess.spawn(Path.join(project, "node_modules", ".bin", "tollgate"), [], {
      cwd: project,
      env: { PATH: `${Path.dirname(process.execPath)}:${process.env["PATH"] ?? ""}`, PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
    const deadline = Date.now() + 60_000
    while (!output.includes("listening")) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the bin did not start: ${output}`)
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(output).toContain("dev mode")
    const networks = await fetch(`http://127.0.0.1:${port}/api/v1/crypto/rpc/networks`)
    expect(networks.status).toBe(200)
    child.kill("SIGTERM")
    expect(await exited).toBe(0)
  }, 90_000)
})
