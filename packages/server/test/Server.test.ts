import { FreePort } from "@tollgate/testkit"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"

const main = Path.join(import.meta.dirname, "..", "src", "main.ts")

interface Running {
  readonly child: ChildProcess.ChildProcess
  readonly output: () => string
  readonly exited: Promise<number | null>
}

const spawnServer = (env: Record<string, string>): Running => {
  let output = ""
  const child = ChildProcess.spawn(process.execPath, [main], {
    env: { PATH: process.env["PATH"] ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, output: () => output, exited }
}

const waitForListening = async (running: Running) => {
  const deadline = Date.now() + 15_000
  while (!running.output().includes("listening")) {
    if (Date.now() > deadline) throw new Error(`server did not start: ${running.output()}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe("Configuration is validated at start: a bad value stops the server naming the field and the rule", () => {
  it.each([
    [{ PORT: "eighty" }, "PORT"],
    [{ PORT: "70000" }, "PORT"],
    [{ TOLLGATE_STORE: "postgres" }, "TOLLGATE_STORE"],
    [{ TOLLGATE_PUBLIC_ORIGIN: "api.example.com/v1" }, "TOLLGATE_PUBLIC_ORIGIN"],
    [{ TOLLGATE_STORE: "redis" }, "TOLLGATE_REDIS_URL"]
  ])("%o is refused, naming %s", async (env, field) => {
    const error = await Effect.runPromise(Effect.flip(Config.load(env)))
    expect(error.message.startsWith(`${field}:`)).toBe(true)
  })

  it("the server process prints one message and exits 1", async () => {
    const running = spawnServer({ PORT: "not-a-port" })
    expect(await running.exited).toBe(1)
    expect(running.output().trim().split("\n")).toHaveLength(1)
    expect(running.output()).toMatch(/^tollgate: invalid configuration: PORT: /)
  })

  it("with no configuration at all the server starts in dev mode", async () => {
    const config = await Effect.runPromise(Config.load({}))
    expect(config.port).toBe(8787)
    expect(config.store).toBe("memory")
    expect(Config.isDevMode(config)).toBe(true)
  })
})

describe("The server shuts down gracefully on SIGTERM and SIGINT", () => {
  it.each(["SIGTERM", "SIGINT"] as const)("%s: serves, then exits 0", async (signal) => {
    const port = await FreePort.freePort()
    const running = spawnServer({ PORT: String(port) })
    await waitForListening(running)
    const response = await fetch(`http://127.0.0.1:${port}/api/v1/crypto/rpc/networks`)
    expect(response.status).toBe(200)
    running.child.kill(signal)
    expect(await running.exited).toBe(0)
  })
})
