/**
 * `POST /augment/search` and `POST /augment/scrape` against the shipped server in dev mode, with
 * web search pointed at a fake SearXNG instance (a real HTTP server speaking its JSON API) and the
 * scraper on. Every address here is loopback, which the scraper refuses: so the refusals are what
 * this file shows (loopback, link-local, a name resolving to loopback), each uncharged; a scraped
 * page and a redirect to loopback are in packages/http/test/Augment.app.test.ts, where a loopback
 * address can stand for a public host.
 */
import { ShippedServer } from "@tollgate/testkit"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Usage from "./support/Usage.ts"

let searxng: Http.Server
let server: ShippedServer.ShippedServer
const hits: Array<string> = []

beforeAll(async () => {
  searxng = Http.createServer((request, response) => {
    hits.push(request.url ?? "")
    const query = new URL(request.url ?? "/", "http://searxng").searchParams.get("q") ?? ""
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
      results: [1, 2, 3].map((n) => ({ title: `${query} ${n}`, url: `https://example.com/${n}`, content: `About ${query}, part ${n}` }))
    }))
  })
  await new Promise<void>((resolve) => searxng.listen(0, "127.0.0.1", resolve))
  const port = (searxng.address() as AddressInfo).port
  server = await ShippedServer.start({ config: { chat: { searxngUrl: `http://127.0.0.1:${port}`, scraping: true } } })
})

afterAll(async () => {
  await server?.stop()
  await new Promise((resolve) => searxng?.close(resolve))
})

const post = (path: string, body: unknown) =>
  fetch(`${server.api}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.credentials!.inferenceKey}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })

describe("POST /augment/search answers the configured provider's results, charged the search price", () => {
  it("results up to limit, and one usage entry at 0.01 USD", async () => {
    const response = await post("/augment/search", { query: "lighthouses", limit: 2 })
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({
      query: "lighthouses",
      results: [
        { title: "lighthouses 1", url: "https://example.com/1", content: "About lighthouses, part 1", date: null },
        { title: "lighthouses 2", url: "https://example.com/2", content: "About lighthouses, part 2", date: null }
      ]
    })
    expect((await Usage.latest(server))[0]).toMatchObject({ sku: "augment-search", unit: 1, nano: 10_000_000 })
  })

  it("a missing query or a limit over 20 is a 400 naming it", async () => {
    const response = await post("/augment/search", { limit: 21 })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({
      details: { query: { _errors: ["Missing key"] }, limit: { _errors: [expect.any(String)] } }
    })
  })
})

describe("POST /augment/scrape keeps the scraper's SSRF rules: private targets are a 400 naming url, and not charged", () => {
  it.each([
    ["loopback", () => `http://127.0.0.1:${(searxng.address() as AddressInfo).port}/search?q=x&format=json`],
    ["link-local (the cloud metadata address)", () => "http://169.254.169.254/latest/meta-data/"],
    ["a name that resolves to loopback", () => `http://localhost:${(searxng.address() as AddressInfo).port}/search?q=x&format=json`],
    ["IPv6 loopback", () => `http://[::1]:${(searxng.address() as AddressInfo).port}/`]
  ])("%s", async (_name, url) => {
    hits.length = 0
    const before = await Usage.latest(server)
    const response = await post("/augment/scrape", { url: url() })
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: expect.stringMatching(/^Invalid request parameters: url: .*is not a public host/),
      details: { _errors: [], url: { _errors: [expect.stringContaining("is not a public host")] } }
    })
    expect(hits).toEqual([])
    expect(await Usage.latest(server)).toEqual(before)
  })

  it("a URL that is not http(s) is a 400", async () => {
    const response = await post("/augment/scrape", { url: "file:///etc/passwd" })
    expect(response.status).toBe(400)
    expect(await response.json()).toMatchObject({ details: { url: { _errors: [expect.stringContaining("not an http(s) URL")] } } })
  })
})
