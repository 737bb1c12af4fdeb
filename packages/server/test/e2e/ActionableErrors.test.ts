/**
 * What a user meets when something is off, through the shipped server: request ids that are the
 * server's own, node's parser refusals as StandardError JSON, HEAD wherever GET answers, 402s that
 * name the resource without its query, and a store outage that says when to retry.
 */
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import * as Net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start({
    env: { TOLLGATE_METRICS: "open" },
    // Something that settles Base, so dev mode offers its USDC entries; never reached, no payment is sent.
    config: { x402: { facilitatorUrl: "http://127.0.0.1:9" } }
  })
})

afterAll(async () => {
  await server?.stop()
})

const bearer = () => ({ authorization: `Bearer ${server.credentials!.adminKey}` })

/** Writes raw bytes on a socket and reads the whole answer (the server closes the connection). */
const rawExchange = (bytes: string) =>
  new Promise<{ readonly status: number; readonly headers: Record<string, string>; readonly body: string }>((resolve, reject) => {
    const socket = Net.connect(server.port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("error", reject)
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const [head = "", body = ""] = text.split("\r\n\r\n")
      const [statusLine = "", ...lines] = head.split("\r\n")
      const headers = Object.fromEntries(lines.map((line) => {
        const at = line.indexOf(":")
        return [line.slice(0, at).toLowerCase(), line.slice(at + 1).trim()]
      }))
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body })
    })
    socket.end(bytes)
  })

describe("x-request-id is the server's own fresh id; the client's id is kept as x-client-request-id", () => {
  it("two calls sending the same id get two fresh ids, each used for the image id, and the client's id back", async () => {
    const generate = () =>
      fetch(`${server.api}/image/generate`, {
        method: "POST",
        headers: { ...bearer(), "content-type": "application/json", "x-request-id": "client-7" },
        body: JSON.stringify({ model: "local-renderer", prompt: "a red square", width: 64, height: 64 })
      })
    const responses = [await generate(), await generate()]
    const ids = responses.map((response) => response.headers.get("x-request-id"))
    expect(new Set(ids).size).toBe(2)
    expect(ids).not.toContain("client-7")
    for (const response of responses) {
      expect(response.status).toBe(200)
      expect(response.headers.get("x-client-request-id")).toBe("client-7")
      expect((await response.json() as { id: string }).id).toBe(response.headers.get("x-request-id"))
    }
    const history = await fetch(`${server.api}/billing/usage-history?sortOrder=desc`, { headers: bearer() })
    expect(history.status).toBe(200)
    const logged = JSON.stringify(await history.json())
    for (const id of ids) expect(logged).toContain(id!)
    expect(logged).not.toContain("client-7")
  })
})

describe("Node's parser refusals answer a StandardError JSON body", () => {
  it("headers over node's limit: 431 with {error}", async () => {
    const answer = await rawExchange(`GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`)
    expect(answer.status).toBe(431)
    expect(answer.headers["content-type"]).toBe("application/json")
    expect(JSON.parse(answer.body)).toEqual({ error: "The request headers are too large" })
    expect(answer.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("a malformed request line: 400 with {error}", async () => {
    const answer = await rawExchange("THIS IS NOT HTTP\r\n\r\n")
    expect(answer.status).toBe(400)
    expect(JSON.parse(answer.body)).toEqual({ error: "The request is not valid HTTP" })
  })

  it("the server keeps answering afterwards", async () => {
    expect((await fetch(`${server.api}/models`)).status).toBe(200)
  })
})

describe("HEAD answers wherever GET does, with GET's status and headers and no body", () => {
  it("every GET route of the OpenAPI document, the document itself, /docs and /metrics", async () => {
    const document = await fetch(`${server.api}/openapi.json`).then((response) => response.json()) as {
      paths: Record<string, Record<string, unknown>>
    }
    const paths = Object.entries(document.paths)
      .filter(([, operations]) => "get" in operations)
      .map(([path]) => path.replace("{walletAddress}", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"))
    expect(paths.length).toBeGreaterThan(5)
    for (const path of [...paths, "/api/v1/openapi.json", "/docs", "/metrics"]) {
      const get = await fetch(`${server.origin}${path}`, { headers: bearer() })
      await get.arrayBuffer()
      const head = await fetch(`${server.origin}${path}`, { method: "HEAD", headers: bearer() })
      expect([path, head.status]).toEqual([path, get.status])
      expect([path, head.headers.get("content-type")]).toEqual([path, get.headers.get("content-type")])
      expect([path, (await head.arrayBuffer()).byteLength]).toEqual([path, 0])
    }
  })
})

// The public origin, which 402s name resources under, defaults to http://localhost:$PORT.
describe("A 402 names the resource without its query string", () => {
  const query = `?note=${"q".repeat(12_000)}`

  it("a metered call with a 12,000-character query: PAYMENT-REQUIRED stays small and names the path", async () => {
    const response = await fetch(`${server.api}/image/generate${query}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "local-renderer", prompt: "a red square" })
    })
    expect(response.status).toBe(402)
    const header = response.headers.get("payment-required")!
    // The operation's bazaar extension may take it to 8 KiB; the query alone would be 16 KiB more.
    expect(header.length).toBeLessThan(8_192)
    const required = JSON.parse(Buffer.from(header, "base64").toString("utf8")) as { resource: { url: string } }
    expect(required.resource.url).toBe(`http://localhost:${server.port}/api/v1/image/generate`)
    const body = await response.json() as { resource: { url: string } }
    expect(body.resource.url).toBe(`http://localhost:${server.port}/api/v1/image/generate`)
  })

  it("the top-up 402 names the top-up path, not the amount's query", async () => {
    const response = await fetch(`${server.api}/x402/top-up?amount=5&note=${"q".repeat(12_000)}`, { method: "POST" })
    expect(response.status).toBe(402)
    const body = await response.json() as { resource: { url: string } }
    expect(body.resource.url).toBe(`http://localhost:${server.port}/api/v1/x402/top-up`)
    expect(response.headers.get("payment-required")!.length).toBeLessThan(4_096)
  })
})

describe("A store outage is a 503 with Retry-After and a message naming no internals", () => {
  // Its own server, never a shared REDIS_URL: the test kills it.
  let redis: RedisServer.RedisServer
  let onRedis: ShippedServer.ShippedServer
  beforeAll(async () => {
    redis = await RedisServer.start()
    onRedis = await ShippedServer.start({ store: "redis", redisUrl: redis.url })
  })
  afterAll(async () => {
    await onRedis?.stop()
    await redis?.stop()
  })

  it("with Redis killed, an authenticated call is 503, Retry-After: 1, and its message has no tag", async () => {
    const headers = { authorization: `Bearer ${onRedis.credentials!.inferenceKey}`, "content-type": "application/json" }
    const call = () =>
      fetch(`${onRedis.api}/image/generate`, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "local-renderer", prompt: "x", width: 64, height: 64 })
      })
    expect((await call()).status).toBe(200)
    await redis.kill()
    const refused = await call()
    expect(refused.status).toBe(503)
    expect(refused.headers.get("retry-after")).toBe("1")
    const body = await refused.json() as { error: string }
    expect(Object.keys(body)).toEqual(["error"])
    expect(body.error).toMatch(/temporarily unavailable; retry shortly$/)
    expect(body.error).not.toMatch(/~|effect|Redis|Error/)
  })
})
