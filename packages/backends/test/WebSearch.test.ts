import { Effect, Exit } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as WebSearch from "../src/WebSearch.ts"

let server: Http.Server
let base: string
beforeAll(async () => {
  server = Http.createServer((request, response) => {
    if (request.url === "/page") {
      response.writeHead(200, { "content-type": "text/html" })
      response.end(
        "<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Title</h1><p>Fish &amp; chips</p></body></html>"
      )
    } else if (request.url === "/moved") {
      response.writeHead(302, { location: "/page" }).end()
    } else if (request.url?.startsWith("/search")) {
      const q = new URL(request.url, "http://x").searchParams.get("q")
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ results: [{ title: `About ${q}`, url: "https://example.org", content: "A result" }] }))
    } else {
      response.writeHead(404).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise((resolve) => server.close(resolve)))

describe("enable_web_scraping: a page is fetched and reduced to text", () => {
  const scrape = WebSearch.scraper({ allowPrivateHosts: true })

  it("keeps the text, drops scripts, styles and tags, follows redirects", async () => {
    expect(await Effect.runPromise(scrape(`${base}/page`))).toEqual({ url: `${base}/page`, text: "Title\nFish & chips" })
    expect((await Effect.runPromise(scrape(`${base}/moved`))).text).toBe("Title\nFish & chips")
  })

  it("fails for a page that does not answer 200, so it is not billed", async () => {
    expect(Exit.isFailure(await Effect.runPromiseExit(scrape(`${base}/gone`)))).toBe(true)
  })
})

describe("enable_web_scraping: the scraper connects only to public addresses, checked on the address it connects to", () => {
  // A server on every local address (dual-stack "::"): any connection that got through would count.
  let target: Http.Server
  let port = 0
  const hits: Array<string> = []
  beforeAll(async () => {
    target = Http.createServer((request, response) => {
      hits.push(request.url ?? "")
      if (request.url === "/redirect-loopback") return response.writeHead(302, { location: `http://127.0.0.3:${port}/page` }).end()
      if (request.url === "/redirect-name") return response.writeHead(302, { location: `http://localhost:${port}/page` }).end()
      response.writeHead(200, { "content-type": "text/plain" }).end("secret")
    })
    await new Promise<void>((resolve) => target.listen(0, "::", resolve))
    port = (target.address() as AddressInfo).port
  })
  afterAll(() => new Promise((resolve) => target.close(resolve)))

  const refusal = async (scrape: ReturnType<typeof WebSearch.scraper>, url: string) => {
    const exit = await Effect.runPromiseExit(scrape(url))
    expect(Exit.isFailure(exit), url).toBe(true)
    return JSON.stringify(exit)
  }

  it.each([
    ["an IPv4-mapped loopback", () => `http://[::ffff:127.0.0.1]:${port}/page`],
    ["IPv6 loopback", () => `http://[::1]:${port}/page`],
    ["the unspecified address", () => `http://0.0.0.0:${port}/page`],
    ["the cloud metadata address (link-local)", () => "http://169.254.169.254/latest/meta-data/"],
    ["a name that resolves to loopback", () => `http://localhost:${port}/page`],
    ["NAT64 of loopback", () => `http://[64:ff9b::7f00:1]:${port}/page`],
    ["a private address", () => "http://10.0.0.1/"]
  ])("%s is refused and nothing is fetched", async (_name, url) => {
    expect(await refusal(WebSearch.scraper(), url())).toContain("is not a public host")
    expect(hits).toEqual([])
  })

  it("a redirect to loopback, by address or by name, is refused at its hop", async () => {
    // 127.0.0.2 stands for a public host here; both redirects lead to other loopback addresses.
    const scrape = WebSearch.scraper({ allowAddress: (address) => address === "127.0.0.2" })
    expect(await refusal(scrape, `http://127.0.0.2:${port}/redirect-loopback`)).toContain("is not a public host")
    expect(await refusal(scrape, `http://127.0.0.2:${port}/redirect-name`)).toContain("is not a public host")
    expect(hits).toEqual(["/redirect-loopback", "/redirect-name"])
  })

  it("non-http schemes are refused", async () => {
    expect(await refusal(WebSearch.scraper(), "file:///etc/passwd")).toContain("is not an http(s) URL")
  })

  it.each([
    ["127.0.0.1", false],
    ["::ffff:127.0.0.1", false],
    ["::ffff:7f00:1", false],
    ["::127.0.0.1", false],
    ["0.0.0.0", false],
    ["::", false],
    ["::1", false],
    ["10.1.2.3", false],
    ["172.16.0.1", false],
    ["192.168.1.1", false],
    ["100.64.0.1", false],
    ["169.254.169.254", false],
    ["fe80::1", false],
    ["fd00::1", false],
    ["fc00::1", false],
    ["ff02::1", false],
    ["224.0.0.1", false],
    ["255.255.255.255", false],
    ["64:ff9b::a00:1", false],
    ["64:ff9b:1::1", false],
    ["2002:7f00:1::", false],
    ["not an address", false],
    ["93.184.216.34", true],
    ["::ffff:93.184.216.34", true],
    ["2606:4700:4700::1111", true]
  ])("isPublicAddress(%s) is %s", (address, expected) => {
    expect(WebSearch.isPublicAddress(address)).toBe(expected)
  })
})

describe("enable_web_search: a SearXNG instance answers the query", () => {
  it("maps its JSON results", async () => {
    const results = await Effect.runPromise(WebSearch.searxng(base)("tollgate"))
    expect(results).toEqual([{ title: "About tollgate", url: "https://example.org", content: "A result", date: undefined }])
  })
})
