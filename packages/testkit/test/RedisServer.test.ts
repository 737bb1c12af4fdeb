/**
 * The throwaway Redis servers: each writes only into its own temporary folder, none outlives the
 * test run that started it, whatever the run filtered or however its files failed, and a machine
 * without `redis-server` fails the run with one line naming it instead of skipping tests.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { RedisServer } from "../src/index.ts"

const repository = Path.join(import.meta.dirname, "..", "..", "..")
const vitest = Path.join(repository, "node_modules", "vitest", "vitest.mjs")
const fixtureConfig = Path.join(import.meta.dirname, "fixtures", "vitest.filtered.config.ts")

const redisCli = (port: number, ...args: ReadonlyArray<string>) =>
  ChildProcess.execFileSync("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], { encoding: "utf8" })

/** The redis-server processes whose working directory (their `--dir`) is under `root`. */
const serversUnder = (root: string): ReadonlyArray<number> =>
  Fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).flatMap((pid) => {
    try {
      if (Fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "redis-server") return []
      return Fs.readlinkSync(`/proc/${pid}/cwd`).startsWith(root) ? [Number(pid)] : []
    } catch {
      return []
    }
  })

/**
 * Runs vitest in a child process whose temporary folder is a fresh one, so every server it starts
 * runs in a folder under it; samples the servers while it runs. Resolves with the most seen at once
 * and those still running 15 s after it exited (polled: the watchdog needs a moment).
 */
const runVitest = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-run-"))
  const { REDIS_URL: _shared, ...inherited } = process.env
  const child = ChildProcess.spawn(process.execPath, [vitest, "run", ...args], {
    cwd: repository,
    env: { ...inherited, TMPDIR: tmp, ...env },
    stdio: "ignore"
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve))
  let most = 0
  let running = true
  void exited.then(() => (running = false))
  while (running) {
    most = Math.max(most, serversUnder(tmp).length)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const code = await exited
  const deadline = Date.now() + 15_000
  while (serversUnder(tmp).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  const left = serversUnder(tmp)
  Fs.rmSync(tmp, { recursive: true, force: true })
  return { code, most, left }
}

describe("A throwaway server writes only into its own temporary folder", () => {
  it("a server and a replica run in folders under the temporary directory, never the repository", async () => {
    const { primary, replica } = await RedisServer.startReplicated()
    try {
      for (const server of [primary, replica]) {
        const dir = redisCli(server.port, "CONFIG", "GET", "dir").trim().split("\n")[1]!
        expect(Fs.realpathSync(dir).startsWith(Fs.realpathSync(Os.tmpdir()))).toBe(true)
        expect(Fs.realpathSync(dir).startsWith(Fs.realpathSync(repository))).toBe(false)
      }
    } finally {
      await primary.stop()
      await replica.stop()
    }
  }, 60_000)
})

describe("No throwaway server outlives its test run, whatever the run filtered or failed", () => {
  it("a name filter that skips every test of the Redis contract files: their server and cluster start, and all stop", async () => {
    const run = await runVitest([
      "packages/redis/test/CreditLedgerRedis.contract.test.ts",
      "-t",
      "no test has this name",
      "--passWithNoTests"
    ])
    expect(run.code).toBe(0)
    // One server and a six-node cluster, started while the file was collected.
    expect(run.most).toBeGreaterThanOrEqual(7)
    expect(run.left).toEqual([])
  }, 180_000)

  it("a file that fails after starting its server: the server stops", async () => {
    const run = await runVitest(["--config", fixtureConfig], { TOLLGATE_FIXTURE_FAIL: "1" })
    expect(run.code).toBe(1)
    expect(run.most).toBe(1)
    expect(run.left).toEqual([])
  }, 120_000)
})

describe("Without redis-server on the PATH the run fails with one line naming it", () => {
  const emptyPath = () => Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-no-redis-"))

  it("the first step of pnpm test exits 1 with that line", () => {
    const result = ChildProcess.spawnSync(
      process.execPath,
      [Path.join(repository, "packages", "testkit", "src", "prerequisites-main.ts")],
      {
        env: { PATH: emptyPath() },
        encoding: "utf8"
      }
    )
    expect(result.status).toBe(1)
    expect(result.stdout).toBe("")
    expect(result.stderr.trim().split("\n")).toEqual([RedisServer.missing("redis-server")])
  })

  it("a file that starts a server fails with it, never skips", async () => {
    const path = process.env["PATH"]
    process.env["PATH"] = emptyPath()
    try {
      await expect(RedisServer.start()).rejects.toThrow(RedisServer.missing("redis-server"))
      await expect(RedisServer.acquire()).rejects.toThrow(RedisServer.missing("redis-server"))
    } finally {
      process.env["PATH"] = path
    }
  })
})
