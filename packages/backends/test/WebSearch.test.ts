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
      response.end("<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Title</h1><p>Fish &amp; chips</p></body></html>")
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

describe("enable_web_scraping: only public http(s) hosts are fetched", () => {
  it("refuses loopback, private and non-http URLs by default", async () => {
    const scrape = WebSearch.scraper()
    for (const url of [`${base}/page`, "http://localhost/", "http://10.0.0.1/", "http://[::1]/", "file:///etc/passwd"]) {
      expect(Exit.isFailure(await Effect.runPromiseExit(scrape(url)))).toBe(true)
    }
    expect(WebSearch.isInternalAddress("192.168.1.1")).toBe(true)
    expect(WebSearch.isInternalAddress("::ffff:127.0.0.1")).toBe(true)
    expect(WebSearch.isInternalAddress("93.184.216.34")).toBe(false)
  })
})

describe("enable_web_search: a SearXNG instance answers the query", () => {
  it("maps its JSON results", async () => {
    const results = await Effect.runPromise(WebSearch.searxng(base)("tollgate"))
    expect(results).toEqual([{ title: "About tollgate", url: "https://example.org", content: "A result", date: undefined }])
  })
})
