import { FakeChatUpstream, FreePort } from "@tollgate/testkit"
import * as Fs from "node:fs"
import * as Os from "node:os"
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
    expect(JSON.parse(running.output())).toMatchObject({ level: "FATAL", message: expect.stringMatching(/^invalid configuration: PORT: /) })
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

describe("Graceful shutdown lets in-flight requests finish before the process exits 0", () => {
  it("a chat stream in flight at SIGTERM is delivered whole", async () => {
    const upstream = await FakeChatUpstream.start(() => ({ pieces: ["one", " two", " three", " four", " five"], delayMs: 150 }))
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-shutdown-"))
    const configFile = Path.join(dir, "config.json")
    const credentialsFile = Path.join(dir, "credentials.json")
    Fs.writeFileSync(configFile, JSON.stringify({
      models: [{ id: "slow-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "slow-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } }
    }))
    const port = await FreePort.freePort()
    const running = spawnServer({ PORT: String(port), TOLLGATE_CONFIG: configFile, TOLLGATE_DEV_CREDENTIALS_FILE: credentialsFile })
    try {
      await waitForListening(running)
      const { inferenceKey } = JSON.parse(Fs.readFileSync(credentialsFile, "utf8")) as { inferenceKey: string }
      const response = await fetch(`http://127.0.0.1:${port}/api/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "slow-model", stream: true, messages: [{ role: "user", content: "count" }] })
      })
      expect(response.status, await response.clone().text()).toBe(200)
      const reader = response.body!.getReader()
      const first = await reader.read()
      expect(first.done).toBe(false)
      running.child.kill("SIGTERM")
      let text = new TextDecoder().decode(first.value)
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
      expect(text).toContain("five")
      expect(text).toContain("[DONE]")
      expect(await running.exited).toBe(0)
    } finally {
      running.child.kill("SIGKILL")
      await upstream.close()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
