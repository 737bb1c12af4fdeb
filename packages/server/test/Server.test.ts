import { FakeChatUpstream, ShippedServer } from "@tollgate/testkit"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"

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
    const running = await ShippedServer.spawn({ env: { PORT: "not-a-port" } })
    expect(await running.exited).toBe(1)
    expect(running.output().trim().split("\n")).toHaveLength(1)
    expect(JSON.parse(running.output())).toMatchObject({ level: "FATAL", message: expect.stringMatching(/^invalid configuration: PORT: /) })
    await running.stop()
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
    const server = await ShippedServer.start()
    const response = await fetch(`${server.api}/crypto/rpc/networks`)
    expect(response.status).toBe(200)
    expect(await server.stop(signal)).toBe(0)
  })
})

describe("Graceful shutdown lets in-flight requests finish before the process exits 0", () => {
  it("a chat stream in flight at SIGTERM is delivered whole", async () => {
    const upstream = await FakeChatUpstream.start(() => ({ pieces: ["one", " two", " three", " four", " five"], delayMs: 150 }))
    const server = await ShippedServer.start({
      config: {
        models: [{ id: "slow-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
        prices: { chat: { "slow-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } }
      }
    })
    try {
      const response = await fetch(`${server.api}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "slow-model", stream: true, messages: [{ role: "user", content: "count" }] })
      })
      expect(response.status, await response.clone().text()).toBe(200)
      const reader = response.body!.getReader()
      const first = await reader.read()
      expect(first.done).toBe(false)
      const exited = server.stop("SIGTERM")
      let text = new TextDecoder().decode(first.value)
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        text += new TextDecoder().decode(value)
      }
      expect(text).toContain("five")
      expect(text).toContain("[DONE]")
      expect(await exited).toBe(0)
    } finally {
      await server.kill()
      await upstream.close()
    }
  })
})
