/**
 * The endpoints an embedder declares with `Tollgate.endpoint` are MCP tools too: through the
 * Express host of this folder, the official MCP SDK client lists them with their declared price
 * and zod schema, and a call is charged exactly the declared price, once per idempotency key.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Host from "./support/Host.ts"

let host: Host.Host
beforeAll(async () => {
  host = await Host.start("express")
}, 90_000)
afterAll(() => host?.stop())

const connect = async () => {
  const client = new Client({ name: "own-endpoint-test", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(`${host.origin}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${host.inferenceKey}` } }
  })
  await client.connect(transport)
  return client
}

/** The account's balance in nano-USD, once no hold is open. */
const balance = async (): Promise<number> => {
  for (;;) {
    const response = await fetch(`${host.origin}/api/v1/api_keys/rate_limits`, {
      headers: { authorization: `Bearer ${host.inferenceKey}` }
    })
    const { balances } = await response.json() as { balances: { usd: string; heldUsd: string } }
    if (Host.nano(balances.heldUsd) === 0) return Host.nano(balances.usd)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe("examples/own-endpoint/express.ts: a declared endpoint is an MCP tool at /mcp, charged its declared price", () => {
  it("tools/list shows summarize and generate with their prices and their zod schemas", async () => {
    const client = await connect()
    const { tools } = await client.listTools()
    const summarize = tools.find((tool) => tool.name === "summarize")!
    expect(summarize.description).toContain("Price: 0.002 USD per call.")
    expect(summarize._meta).toEqual({ "tollgate/price": { mode: "flat", usd: "0.002" } })
    expect(summarize.inputSchema).toEqual({ type: "object", properties: { text: { type: "string", minLength: 1 } }, required: ["text"] })
    const generate = tools.find((tool) => tool.name === "generate")!
    expect(generate._meta).toMatchObject({ "tollgate/price": { mode: "per_unit", usdPerUnit: "0.00001" } })
    expect(generate.inputSchema).toMatchObject({ properties: { max_tokens: { type: "integer", maximum: 4096 } } })
    await client.close()
  })

  it("summarize called as a tool: its answer, exactly 0.002 USD charged; the retry with the same idempotency-key charges nothing", async () => {
    const client = await connect()
    const before = await balance()
    const meta = { "idempotency-key": `own-mcp-${Date.now()}` }
    const first = await client.callTool({ name: "summarize", arguments: { text: "the quick brown fox" }, _meta: meta }) as CallToolResult
    expect(first.isError).toBeUndefined()
    expect(first.structuredContent).toEqual({ summary: "the quick brown fox" })
    expect(await balance()).toBe(before - 2_000_000)
    const replay = await client.callTool({ name: "summarize", arguments: { text: "the quick brown fox" }, _meta: meta }) as CallToolResult
    expect(replay.structuredContent).toEqual({ summary: "the quick brown fox" })
    expect(await balance()).toBe(before - 2_000_000)
    await client.close()
  })

  it("a call without text is an isError result naming text, and charges nothing", async () => {
    const client = await connect()
    const before = await balance()
    const result = await client.callTool({ name: "summarize", arguments: { txt: "hello" } }) as CallToolResult
    expect(result.isError).toBe(true)
    expect(result.structuredContent).toMatchObject({ details: { text: { _errors: [expect.any(String)] } } })
    expect(await balance()).toBe(before)
    await client.close()
  })
})
