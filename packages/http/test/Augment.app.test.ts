/**
 * `POST /augment/scrape` with the scraper chat uses, where a loopback address (127.0.0.2) stands
 * for a public host: the only way to show a page that is scraped and charged, and a redirect from
 * a "public" page to loopback refused at its hop, without the internet. The refusals a public
 * server makes from the URL alone (loopback, link-local, a name resolving to loopback) are shown
 * through the shipped server in packages/server/test/e2e/Augment.shipped.test.ts. The MCP tool
 * `web_scrape` is shown here too, since only here can a page be scraped.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import * as WebSearch from "@tollgate/backends/WebSearch"
import { CreditLedger, Money, PricingEngine } from "@tollgate/core"
import * as SearchProvider from "@tollgate/core/SearchProvider"
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { App, Handlers, Mcp } from "../src/index.ts"
import * as Augment from "../src/routes/Augment.ts"
import * as TestApp from "./support/TestApp.ts"

const services = () =>
  TestApp.layerMetered(Layer.mergeAll(
    PricingEngine.layer(),
    SearchProvider.layer({ scrape: WebSearch.scraper({ allowAddress: (address) => address === "127.0.0.2" }) })
  ))

let baseURL: string
let apiKey: string
let accountId: string
let pagePort: number
let context: Context.Context<Layer.Success<ReturnType<typeof services>>>
let dispose: () => Promise<void>
const hits: Array<string> = []

beforeAll(async () => {
  const pages = Http.createServer((request, response) => {
    hits.push(request.url ?? "")
    if (request.url === "/redirect-loopback") return response.writeHead(302, { location: `http://127.0.0.1:${pagePort}/secret` }).end()
    if (request.url === "/redirect-name") return response.writeHead(302, { location: `http://localhost:${pagePort}/secret` }).end()
    response.writeHead(200, { "content-type": "text/html" }).end(
      "<html><body><h1>Lighthouse</h1><script>x()</script><p>Keeper's log</p></body></html>"
    )
  })
  await new Promise<void>((resolve) => pages.listen(0, "::", resolve))
  pagePort = (pages.address() as AddressInfo).port
  const scope = Effect.runSync(Scope.make())
  context = await TestApp.buildContext(services(), scope)
  const node = await Handlers.toNodeHandler(
    App.layer<Layer.Success<ReturnType<typeof services>> | App.Dispatch>([...Augment.routes, Mcp.route]).pipe(
      Layer.provide(Layer.succeedContext(context))
    )
  )
  const server = Http.createServer(node.handler)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`
  const seeded = await TestApp.seedAccount(context, { label: "augment", grant: Money.usd(10) })
  apiKey = seeded.key
  accountId = seeded.id
  dispose = async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    pages.closeAllConnections()
    await new Promise((resolve) => pages.close(resolve))
    await node.dispose()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
})

afterAll(() => dispose())

const ledger = <A>(f: (ledger: CreditLedger.CreditLedger["Service"]) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.flatMap(CreditLedger.CreditLedger, f).pipe(Effect.provide(context)) as Effect.Effect<A>)

const balance = () => ledger((l) => l.balance(accountId))

const scrape = (url: string) =>
  fetch(`${baseURL}/augment/scrape`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ url })
  })

describe("POST /augment/scrape: a public page comes back as text, charged the price per URL", () => {
  it("the page's text without its tags and scripts; the scrape's price captured", async () => {
    const before = await balance()
    const response = await scrape(`http://127.0.0.2:${pagePort}/page`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ url: `http://127.0.0.2:${pagePort}/page`, content: "Lighthouse\nKeeper's log", format: "text" })
    expect(before.usd - (await balance()).usd).toBe(PricingEngine.defaults.operations.augmentScrape)
    const usage = await ledger((l) => l.usage(accountId, { order: "desc", limit: 1 }))
    expect(usage.entries[0]).toMatchObject({ sku: "augment-scrape", units: 1, amount: PricingEngine.defaults.operations.augmentScrape })
  })
})

describe("web_scrape, the MCP tool, scrapes a public page as its route does: the page's text, one entry naming the tool", () => {
  it("called with the key by the MCP SDK client: the route's JSON, the scrape's price captured once", async () => {
    const client = new Client({ name: "augment-test", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${baseURL.replace("/api/v1", "")}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${apiKey}` } }
      })
    )
    const before = await balance()
    const url = `http://127.0.0.2:${pagePort}/page`
    const result = await client.callTool({ name: "web_scrape", arguments: { url } }) as CallToolResult
    await client.close()
    expect(result.isError).toBeUndefined()
    expect(result.structuredContent).toEqual({ url, content: "Lighthouse\nKeeper's log", format: "text" })
    expect(before.usd - (await balance()).usd).toBe(PricingEngine.defaults.operations.augmentScrape)
    const usage = await ledger((l) => l.usage(accountId, { order: "desc", limit: 1 }))
    expect(usage.entries[0]).toMatchObject({
      sku: "augment-scrape",
      units: 1,
      notes: `MCP tool web_scrape, ${url}`,
      requestId: result._meta?.["tollgate/request-id"]
    })
  })
})

describe("POST /augment/scrape keeps the scraper's SSRF rules: a redirect to loopback is refused at its hop, and not charged", () => {
  it.each(["/redirect-loopback", "/redirect-name"])("%s", async (path) => {
    hits.length = 0
    const before = await balance()
    const response = await scrape(`http://127.0.0.2:${pagePort}${path}`)
    expect(response.status).toBe(400)
    expect(await response.json()).toEqual({
      error: expect.stringMatching(/^Invalid request parameters: url: .*is not a public host/),
      details: { _errors: [], url: { _errors: [expect.stringContaining("is not a public host")] } }
    })
    expect(hits).toEqual([path])
    const after = await balance()
    expect(after.usd).toBe(before.usd)
    expect(after.heldUsd).toBe(0)
  })
})
