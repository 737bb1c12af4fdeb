/**
 * Production as docs/operations.md and docs/configuration.md give it: the minimal production file
 * starts the shipped server on a throwaway Redis exactly as written (read from the guide itself,
 * so the guide cannot drift from what starts), with workers, in the one log shape; it answers
 * what a production server answers; and SIGTERM to the documented process stops it and releases
 * the port. The configuration guide's sample file starts as copied too.
 */
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const docs = Path.join(import.meta.dirname, "..", "..", "..", "..", "docs")

/** The first ```json block after `heading` in a guide, parsed. */
const jsonBlockAfter = (file: string, heading: string): unknown => {
  const text = Fs.readFileSync(Path.join(docs, file), "utf8")
  const from = text.indexOf(heading)
  if (from < 0) throw new Error(`${file} has no "${heading}"`)
  const block = /```json\n([\s\S]*?)\n```/u.exec(text.slice(from))
  if (block === null) throw new Error(`${file} has no JSON block after "${heading}"`)
  return JSON.parse(block[1]!)
}

const refusesConnections = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = Net.connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", () => resolve(true))
  })

const redis = await RedisServer.acquire()

afterAll(() => redis.stop())

describe("The minimal production file of docs/operations.md starts on Redis as written, and SIGTERM stops it", () => {
  let server: ShippedServer.ShippedServer
  beforeAll(async () => {
    server = await ShippedServer.start({
      config: jsonBlockAfter("operations.md", "## A production start"),
      signingKey: true,
      store: "redis",
      redisUrl: redis.url,
      // Two workers: the supervisor and its children, as `auto` runs on a machine with cores to spare.
      env: { TOLLGATE_WORKERS: "2", TOLLGATE_LOG_LEVEL: "info" }
    })
  }, 90_000)
  afterAll(async () => {
    await server?.stop()
  })

  it("it serves the file's model, and every line it printed is one JSON object whose message is a string", async () => {
    const models = await fetch(`${server.api}/models?type=text`).then((response) => response.json()) as {
      data: ReadonlyArray<{ id: string }>
    }
    expect(models.data.map((model) => model.id)).toEqual(["llama-3.3-70b"])
    const lines = server.stdout().trim().split("\n").map((line) => JSON.parse(line) as { message: unknown; annotations: unknown })
    const supervisor = lines.find((line) => line.message === "tollgate supervising workers")
    expect(supervisor?.annotations).toEqual({ workers: 2, port: server.port })
    for (const line of lines) expect(typeof line.message).toBe("string")
  })

  it("a paid call without credentials: 402 with an empty accepts, and no promise of a top-up", async () => {
    const response = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "llama-3.3-70b", messages: [{ role: "user", content: "hi" }] })
    })
    expect(response.status).toBe(402)
    const body = await response.json() as { accepts: Array<unknown>; resource: { description: string } }
    expect(body.accepts).toEqual([])
    expect(body.resource.description).toBe("Send an API key (Authorization: Bearer); wallet top-ups are not configured on this server")
    expect(body.resource.description).not.toMatch(/USDC|Base|Solana/)
  })

  it("a credit grant by an ADMIN key of an account that is not an operator: 403 naming TOLLGATE_OPERATOR_ACCOUNTS", async () => {
    const response = await fetch(`${server.api}/billing/credits`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.credentials!.adminKey}`, "content-type": "application/json" },
      body: JSON.stringify({ accountId: server.credentials!.accountId, amountUsd: "1.00", reference: "not-an-operator" })
    })
    expect(response.status).toBe(403)
    expect(await response.json()).toEqual({
      error: "Only operator accounts may grant credits: the server lists them in TOLLGATE_OPERATOR_ACCOUNTS"
    })
  })

  it("SIGTERM to the process the guide starts: it exits 0 and the port refuses connections", async () => {
    expect(await refusesConnections(server.port)).toBe(false)
    expect(await server.stop("SIGTERM")).toBe(0)
    expect(await refusesConnections(server.port)).toBe(true)
  }, 60_000)
})

describe("The sample file of docs/configuration.md starts a production server as copied", () => {
  it("answers, with the sample's model listed", async () => {
    const server = await ShippedServer.start({
      config: jsonBlockAfter("configuration.md", "## The JSON file"),
      signingKey: true,
      store: "memory"
    })
    try {
      const models = await fetch(`${server.api}/models?type=text`).then((response) => response.json()) as {
        data: ReadonlyArray<{ id: string }>
      }
      expect(models.data.map((model) => model.id)).toContain("llama-3.3-70b")
    } finally {
      await server.stop()
    }
  }, 90_000)
})
