/**
 * What goes over the socket, read byte for byte from the shipped server: header names in lower
 * case, as the spec writes them (node's own `Date`, `Connection`, `Keep-Alive` and
 * `Transfer-Encoding` included), and HTTP/1.0 and 1.1 as the only versions served.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Net from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start()
}, 90_000)

afterAll(() => server?.stop())

/** The bytes the server sends for `request` until it closes the connection or `until` matches. */
const exchange = (request: string, until?: RegExp) =>
  new Promise<string>((resolve, reject) => {
    const url = new URL(server.origin)
    const socket = Net.connect(Number(url.port), url.hostname, () => socket.write(request))
    let received = ""
    socket.setEncoding("latin1")
    socket.on("data", (chunk: string) => {
      received += chunk
      if (until?.test(received)) socket.destroy()
    })
    socket.on("close", () => resolve(received))
    socket.on("error", reject)
  })

interface Response {
  readonly statusLine: string
  readonly names: ReadonlyArray<string>
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

const parse = (raw: string): Response => {
  const end = raw.indexOf("\r\n\r\n")
  const [statusLine, ...lines] = raw.slice(0, end).split("\r\n")
  const names = lines.map((line) => line.slice(0, line.indexOf(":")))
  const headers = Object.fromEntries(
    lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()])
  )
  return { statusLine: statusLine!, names, headers, body: raw.slice(end + 4) }
}

const get = (path: string, version = "1.1", headers = "") =>
  `GET ${path} HTTP/${version}\r\nhost: localhost\r\n${headers}${version === "1.1" ? "connection: close\r\n" : ""}\r\n`

describe("Header names on the wire are lower case, node's own included", () => {
  it("a JSON answer kept alive: date, connection and keep-alive as the routes' headers are", async () => {
    const raw = await exchange(`GET / HTTP/1.1\r\nhost: localhost\r\n\r\n`, /\r\n\r\n\{.*\}$/s)
    const response = parse(raw)
    expect(response.statusLine).toBe("HTTP/1.1 200 OK")
    expect(response.names).toEqual(expect.arrayContaining(["date", "connection", "keep-alive", "content-length", "x-request-id"]))
    expect(response.names.filter((name) => name !== name.toLowerCase())).toEqual([])
  })

  it("a streamed answer: transfer-encoding too", async () => {
    const body = JSON.stringify({ model: "local-echo", stream: true, messages: [{ role: "user", content: "hi" }] })
    const raw = await exchange(
      `POST /api/v1/chat/completions HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${server.credentials!.inferenceKey}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
    )
    const response = parse(raw)
    expect(response.statusLine).toBe("HTTP/1.1 200 OK")
    expect(response.headers["transfer-encoding"]).toBe("chunked")
    expect(response.names.filter((name) => name !== name.toLowerCase())).toEqual([])
  })

  it("an HTTP/1.0 request, answered with connection: close", async () => {
    const response = parse(await exchange(get("/api/v1/models", "1.0")))
    expect(response.statusLine).toBe("HTTP/1.1 200 OK")
    expect(response.headers["connection"]).toBe("close")
    expect(response.names.filter((name) => name !== name.toLowerCase())).toEqual([])
  })

  it("a refusal: the 404's names as well", async () => {
    const response = parse(await exchange(get("/no/such/path")))
    expect(response.statusLine).toBe("HTTP/1.1 404 Not Found")
    expect(response.names.filter((name) => name !== name.toLowerCase())).toEqual([])
  })
})

describe("A request line naming an HTTP version other than 1.0 and 1.1 is answered 505 with a StandardError", () => {
  it.each(["2.0", "0.9"])("HTTP/%s, which node's parser lets through: 505", async (version) => {
    const response = parse(await exchange(get("/", version)))
    expect(response.statusLine).toBe("HTTP/1.1 505 HTTP Version Not Supported")
    expect(response.headers["content-type"]).toBe("application/json")
    expect(response.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
    expect(JSON.parse(response.body)).toEqual({ error: `HTTP/${version} is not supported; use HTTP/1.1` })
    expect(response.names.filter((name) => name !== name.toLowerCase())).toEqual([])
  })

  it.each(["1.2", "3.0"])("HTTP/%s, which node's parser refuses: 505 too", async (version) => {
    const response = parse(await exchange(get("/", version)))
    expect(response.statusLine).toBe("HTTP/1.1 505 HTTP Version Not Supported")
    expect(JSON.parse(response.body)).toEqual({ error: "The HTTP version is not supported; use HTTP/1.1" })
  })

  it("a paid call over HTTP/2.0 is refused before it is charged", async () => {
    const headers = { authorization: `Bearer ${server.credentials!.adminKey}` }
    const balance = async () => (await fetch(`${server.api}/billing/balance`, { headers })).headers.get("x-service-balance-usd")
    const before = await balance()
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
    const response = parse(
      await exchange(
        `POST /api/v1/crypto/rpc/base-mainnet HTTP/2.0\r\nhost: localhost\r\nauthorization: Bearer ${
          server.credentials!.inferenceKey
        }\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
      )
    )
    expect(response.statusLine).toBe("HTTP/1.1 505 HTTP Version Not Supported")
    expect(await balance()).toBe(before)
  })
})
