import { Networks } from "@tollgate/core"
import { Layer } from "effect"
import * as Zlib from "node:zlib"
import { afterAll, describe, expect, it } from "vitest"
import { App, Handlers, ServiceInfo } from "../src/index.ts"
import * as NetworksRoute from "../src/routes/Networks.ts"

const app = App.layer([NetworksRoute.route]).pipe(
  Layer.provide(ServiceInfo.layer({ version: "20261122.120000", hostName: "test-host" }))
)
const { dispose, handler } = Handlers.toWebHandler(app)
afterAll(dispose)

const get = (path: string, init?: RequestInit) => handler(new Request(`http://localhost${path}`, init))

const expectServiceHeaders = (response: Response) => {
  expect(response.headers.get("x-request-id")).toMatch(/.+/)
  expect(response.headers.get("x-service-version")).toBe("20261122.120000")
  expect(Date.parse(response.headers.get("x-service-timestamp") ?? "")).not.toBeNaN()
}

describe("GET /crypto/rpc/networks lists the 25 slugs, sorted, without authentication", () => {
  it("answers 200 with the exact sorted list", async () => {
    const response = await get("/api/v1/crypto/rpc/networks")
    expect(response.status).toBe(200)
    expect(response.headers.get("content-type")).toMatch(/^application\/json/)
    const body = await response.json() as { networks: Array<string> }
    expect(body.networks).toHaveLength(25)
    expect(body.networks).toEqual([...body.networks].sort())
    expect(body.networks).toEqual(Networks.slugs)
    expectServiceHeaders(response)
    expect(response.headers.get("x-service-host-name")).toBeNull()
  })
})

describe("Every response carries the service headers, errors included", () => {
  it("an unknown route is a 404 StandardError with the headers and the host name", async () => {
    const response = await get("/api/v1/nope")
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual({ error: expect.any(String) })
    expectServiceHeaders(response)
    expect(response.headers.get("x-service-host-name")).toBe("test-host")
  })

  it("a known path with the wrong method is a 405 StandardError with Allow", async () => {
    const response = await get("/api/v1/crypto/rpc/networks", { method: "DELETE" })
    expect(response.status).toBe(405)
    expect(response.headers.get("allow")).toBe("GET")
    expect(await response.json()).toEqual({ error: expect.any(String) })
    expectServiceHeaders(response)
  })
})

describe("x-request-id is the server's own fresh id; the client's id comes back as x-client-request-id", () => {
  it("every response gets a new unique UUID, whatever the client sent", async () => {
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => get("/api/v1/crypto/rpc/networks", { headers: { "x-request-id": "abc-123" } }))
    )
    const ids = responses.map((response) => response.headers.get("x-request-id"))
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(new Set(ids).size).toBe(20)
    for (const response of responses) expect(response.headers.get("x-client-request-id")).toBe("abc-123")
  })

  it("a malformed client id is dropped, and no id sent means no x-client-request-id", async () => {
    const malformed = await get("/api/v1/crypto/rpc/networks", { headers: { "x-request-id": "has spaces and \"quotes\"" } })
    expect(malformed.headers.get("x-client-request-id")).toBeNull()
    const none = await get("/api/v1/nope")
    expect(none.headers.get("x-client-request-id")).toBeNull()
    expect(none.headers.get("x-request-id")).toMatch(/.+/)
  })
})

describe("JSON bodies are compressed by Accept-Encoding", () => {
  it.each([["br", Zlib.brotliDecompressSync], ["gzip", Zlib.gunzipSync]] as const)("%s", async (encoding, decode) => {
    const response = await get("/api/v1/crypto/rpc/networks", { headers: { "accept-encoding": encoding } })
    expect(response.headers.get("content-encoding")).toBe(encoding)
    const body = JSON.parse(decode(Buffer.from(await response.arrayBuffer())).toString("utf8"))
    expect(body.networks).toEqual(Networks.slugs)
  })
})
