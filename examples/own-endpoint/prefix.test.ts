/**
 * Tollgate under a prefix of the host's: `examples/own-endpoint/express-prefix.ts` mounts it at
 * `/payments` with `basePath`. The links a 402 gives name the prefix and answer through the host,
 * `/payments/mcp` serves the declared endpoints as tools, and the host's own routes stay its own.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Host from "./support/Host.ts"

let host: Host.Host
beforeAll(async () => {
  host = await Host.start("express-prefix", {}, "/payments")
}, 90_000)
afterAll(() => host?.stop())

const json = (body: unknown) => ({ method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })

describe("Under basePath /payments, every link of a 402 names the prefix and answers through the host", () => {
  it("the 402 of /payments/v1/summarize links only under /payments; each link, the docs and the portal's files answer 200", async () => {
    const response = await fetch(`${host.origin}/payments/v1/summarize`, json({ text: "hi" }))
    expect(response.status).toBe(402)
    const links = Host.links(await response.json())
    expect(links).toEqual([
      "/payments/",
      "/payments/api-keys",
      "/payments/api/v1/x402/top-up",
      "/payments/docs/authentication",
      "/payments/docs/wallets",
      "/payments/v1/summarize"
    ])
    const portal = await (await fetch(`${host.origin}/payments/api-keys`)).text()
    // The portal's page loads its files relative to itself: under the prefix too.
    const assets = [...portal.matchAll(/(?:src|href)="(portal\/[^"]+)"/gu)].map((match) => `/payments/${match[1]}`)
    expect(assets).toEqual(["/payments/portal/portal.css", "/payments/portal/portal.js"])
    for (
      const path of [
        "/payments/docs",
        "/payments/api/v1/openapi.json",
        ...assets,
        ...links.filter((link) => link !== "/payments/v1/summarize")
      ]
    ) {
      const page = await fetch(`${host.origin}${path}`)
      expect(page.status, path).toBe(200)
      await page.arrayBuffer()
    }
    expect(await (await fetch(`${host.origin}/health`)).json()).toEqual({ ok: true })
    expect((await fetch(`${host.origin}/api/v1/models`)).status).toBe(404)
  })
})

describe("Under basePath /payments, /payments/mcp serves the declared endpoints as tools, charged their declared price", () => {
  it("summarize listed and called with the dev key: its answer, one 0.002 USD entry naming the tool", async () => {
    const client = new Client({ name: "own-endpoint-prefix-test", version: "1.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${host.origin}/payments/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${host.inferenceKey}` } }
      })
    )
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["summarize", "generate"]))
    const result = await client.callTool({ name: "summarize", arguments: { text: "the quick brown fox" } }) as CallToolResult
    expect(result.structuredContent).toEqual({ summary: "the quick brown fox" })
    await client.close()
    const usage = await fetch(`${host.origin}/payments/api/v1/billing/usage-history?limit=1`, {
      headers: { authorization: `Bearer ${host.adminKey}` }
    })
    const { data } = await usage.json() as { data: Array<Record<string, unknown>> }
    expect(data[0]).toMatchObject({
      sku: "summarize",
      amount: 0.002,
      notes: "MCP tool summarize",
      inferenceDetails: { requestId: result._meta?.["tollgate/request-id"] }
    })
  })
})
