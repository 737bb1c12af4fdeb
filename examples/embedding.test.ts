import { Networks } from "@tollgate/core"
import { FreePort } from "@tollgate/testkit"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import OpenAI from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Express from "./express.ts"
import * as Fastify from "./fastify.ts"
import * as Hono from "./hono.ts"
import * as NodeHttp from "./node-http.ts"

describe.each(
  [
    ["node:http at the root", NodeHttp.start],
    ["Express 5 under /payments", Express.start],
    ["Fastify 5 under /payments", Fastify.start],
    ["Hono 4 under /payments", Hono.start]
  ] as const
)("Embedding with Tollgate.make: %s serves the API and charges for a paid call", (_host, start) => {
  let host: Awaited<ReturnType<typeof start>>
  // Building tollgate starts its document workers: on a loaded machine that takes longer than vitest's 10 s.
  beforeAll(async () => {
    host = await start(0)
  }, 60_000)
  afterAll(() => host.close())

  it("the public networks route and a StandardError 404 answer through the host", async () => {
    const response = await fetch(`${host.url}${host.prefix}/api/v1/crypto/rpc/networks`)
    expect(response.status).toBe(200)
    expect(response.headers.get("x-service-version")).toMatch(/.+/)
    expect(await response.json()).toEqual({ networks: Networks.slugs })
    const missing = await fetch(`${host.url}${host.prefix}/api/v1/nope`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ error: expect.any(String) })
  })

  it("a chat completion with the dev INFERENCE key is answered and charged", async () => {
    const key = host.tollgate.devCredentials?.inferenceKey
    expect(key).toEqual(expect.any(String))
    const client = new OpenAI({ apiKey: key!, baseURL: `${host.url}${host.prefix}/api/v1` })
    const call = () =>
      client.chat.completions.create({ model: "local-echo", messages: [{ role: "user", content: "hello" }] }).withResponse()
    const first = await call()
    expect(first.response.status).toBe(200)
    expect(first.data.choices[0]?.message.content).toEqual(expect.any(String))
    // The header is the balance before the call: the second call sees what the first one cost.
    const second = await call()
    const balanceOf = (response: Response) => Number(response.headers.get("x-service-balance-usd"))
    expect(balanceOf(first.response)).toBe(25)
    // local-echo's price: 0.1 USD per million input tokens, 0.2 per million output tokens.
    const { completion_tokens, prompt_tokens } = first.data.usage!
    expect(prompt_tokens).toBeGreaterThan(0)
    expect(completion_tokens).toBeGreaterThan(0)
    expect(25 - balanceOf(second.response)).toBeCloseTo((prompt_tokens * 0.1 + completion_tokens * 0.2) / 1_000_000, 12)
  })

  it("the portal (/api-keys) and what it loads, addressed relative to the page, answer through the host", async () => {
    const page = `${host.url}${host.prefix}/api-keys`
    const response = await fetch(page)
    expect(response.status).toBe(200)
    const html = await response.text()
    const assets = [...html.matchAll(/(?:src|href)="(portal\/[^"]+)"/g)].map((match) => new URL(match[1]!, page).href)
    expect(assets).toEqual([`${host.url}${host.prefix}/portal/portal.css`, `${host.url}${host.prefix}/portal/portal.js`])
    for (const asset of assets) expect((await fetch(asset)).status, asset).toBe(200)
    const account = await fetch(new URL("api/v1/portal/account", page))
    expect(account.status).toBe(401)
    expect(await account.json()).toEqual({ error: expect.any(String) })
  })
})

describe("Embedding with Tollgate.make: the dev keys line is printed before the host's own listening line", () => {
  it("node examples/express.ts: the line with the keys comes before `serving on`", async () => {
    const port = await FreePort.freePort()
    const child = ChildProcess.spawn(process.execPath, [Path.join(import.meta.dirname, "express.ts")], {
      env: { PATH: process.env["PATH"] ?? "", PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (chunk: Buffer) => void (output += chunk.toString()))
    const exited = new Promise((resolve) => child.once("exit", resolve))
    try {
      while (!output.includes("serving on")) {
        if (child.exitCode !== null) throw new Error(output)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      const lines = output.split("\n")
      const keys = lines.findIndex((line) => line.includes("\"inferenceKey\""))
      expect(keys).toBeGreaterThanOrEqual(0)
      expect(keys).toBeLessThan(lines.findIndex((line) => line.startsWith("serving on")))
    } finally {
      child.kill("SIGKILL")
      await exited
    }
  }, 90_000)
})
