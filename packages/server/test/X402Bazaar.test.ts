/**
 * Discovery: every 402 of a paid operation carries its bazaar extension, and `GET /.well-known/x402`
 * lists every paid resource, through the shipped server and read with the official decoders.
 */
import { X402 } from "@tollgate/core"
import { Anvil, ShippedServer } from "@tollgate/testkit"
import { decodePaymentRequiredHeader } from "@x402/core/http"
import { type DiscoveryExtension, validateDiscoveryExtension, validateDiscoveryExtensionSpec } from "@x402/extensions/bazaar"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Config from "../src/Config.ts"
import * as Tollgate from "../src/Tollgate.ts"

let server: ShippedServer.ShippedServer

interface Item {
  readonly resource: string
  readonly type: string
  readonly method: string
  readonly accepts: ReadonlyArray<X402.PaymentRequirements>
  readonly price: Record<string, string>
  readonly extensions: { readonly bazaar: DiscoveryExtension & { readonly info: { readonly input: Record<string, unknown> } } }
}

const discovery = async () =>
  (await (await fetch(`${server.origin}/.well-known/x402`)).json()) as {
    version: number
    x402Version: number
    resources: ReadonlyArray<string>
    items: ReadonlyArray<Item>
  }

beforeAll(async () => {
  // Base is settled here (the relayer and an RPC URL), so the 402s offer payments; no call settles in these tests.
  server = await ShippedServer.start({
    config: {
      x402: {
        payTo: { evm: "0x1111111111111111111111111111111111111111" },
        relayerKey: Anvil.devPrivateKey,
        evmRpcUrl: "http://127.0.0.1:9"
      },
      // Never reached: an unpaid call is refused before it is forwarded.
      rpc: { upstreams: { "base-mainnet": ["http://127.0.0.1:9"] } }
    }
  })
})

afterAll(async () => {
  await server?.stop()
})

describe("Bazaar: a paid call's 402 carries its operation's discovery extension (input and output schema, an example), next to its price", () => {
  it("the RPC proxy's 402 declares a POST with a JSON body, its example, the route template and an example answer", async () => {
    const answer = await fetch(`${server.origin}/api/v1/crypto/rpc/base-mainnet`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", method: "eth_blockNumber", params: [], id: 1 })
    })
    expect(answer.status).toBe(402)
    const required = decodePaymentRequiredHeader(answer.headers.get("payment-required")!)
    const bazaar = required.extensions?.["bazaar"] as DiscoveryExtension
    expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true })
    expect(validateDiscoveryExtensionSpec(bazaar as unknown as Record<string, unknown>)).toEqual({ valid: true })
    expect(bazaar.info.input).toMatchObject({
      type: "http",
      method: "POST",
      bodyType: "json",
      body: { jsonrpc: "2.0", method: "eth_blockNumber", params: [], id: 1 }
    })
    expect(bazaar.info.output).toMatchObject({ example: { jsonrpc: "2.0", id: 1, result: "0x1b4" } })
    expect((bazaar as { routeTemplate?: string }).routeTemplate).toBe("/api/v1/crypto/rpc/:network")
    // The price is the 402's own: a voucher of 12.5 base units rounded up, below the per-call floor, then the top-up.
    expect(required.accepts.map((accept) => [accept.scheme, accept.amount])).toEqual([["batch-settlement", "13"], ["exact", "5000000"]])
    const body = (await answer.json()) as { extensions: Record<string, unknown> }
    expect(body.extensions["bazaar"]).toEqual(bazaar)
  })

  it("a chat completion's 402 (above the per-call floor) offers the call at its quote and declares the route's example", async () => {
    const answer = await fetch(`${server.origin}/api/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "llama-3.3-70b", max_tokens: 2000, messages: [{ role: "user", content: "Say hello" }] })
    })
    expect(answer.status).toBe(402)
    const required = decodePaymentRequiredHeader(answer.headers.get("payment-required")!)
    const bazaar = required.extensions?.["bazaar"] as DiscoveryExtension
    expect(validateDiscoveryExtension(bazaar)).toEqual({ valid: true })
    expect(bazaar.info.input).toMatchObject({ method: "POST", bodyType: "json", body: { model: "llama-3.3-70b" } })
    expect(required.accepts[0]).toMatchObject({ scheme: "upto", network: X402.BASE_MAINNET })
  })

  it("a caller refused before the body is read (no credentials, chunked body) still gets the extension", async () => {
    const answer = await fetch(`${server.origin}/api/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Blob([JSON.stringify({ model: "text-embedding-3-small", input: "hi" })]).stream(),
      duplex: "half"
    } as RequestInit)
    expect(answer.status).toBe(402)
    const bazaar = decodePaymentRequiredHeader(answer.headers.get("payment-required")!).extensions?.["bazaar"] as DiscoveryExtension
    expect(bazaar.info.input).toMatchObject({ method: "POST", body: { model: "text-embedding-3-small", input: "The quick brown fox" } })
  })
})

describe("GET /.well-known/x402 lists every paid resource, each with the extension its 402 carries", () => {
  it("lists exactly the metered operations of the OpenAPI document", async () => {
    const document = (await (await fetch(`${server.origin}/api/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { "x-x402"?: unknown }>>
    }
    const metered = Object.entries(document.paths).flatMap(([path, operations]) =>
      Object.entries(operations).filter(([, operation]) => operation["x-x402"] !== undefined).map(([method]) =>
        `${method.toUpperCase()} ${path.replace(/\{([A-Za-z0-9_]+)\}/g, ":$1")}`
      )
    ).sort()
    const listed = await discovery()
    expect(listed.version).toBe(1)
    expect(listed.x402Version).toBe(2)
    expect(listed.resources).toEqual(listed.items.map((item) => item.resource))
    const http = listed.items.filter((item) => item.type === "http")
    expect(http.map((item) => `${item.method} ${new URL(item.resource).pathname}`).sort()).toEqual(metered)
    expect(metered.length).toBeGreaterThan(15)
  })

  it("each listed resource answers a caller without credentials with a 402 carrying the listed extension, valid by the SDK's own check", async () => {
    for (const item of (await discovery()).items.filter((item) => item.type === "http")) {
      expect(validateDiscoveryExtensionSpec(item.extensions.bazaar as unknown as Record<string, unknown>), item.resource).toEqual({
        valid: true
      })
      // A body of unknown length: the 402 comes before the body is read, whatever the operation takes.
      const path = new URL(item.resource).pathname.replace(":network", "base-mainnet")
      const answer = await fetch(`${server.origin}${path}`, {
        method: item.method,
        body: new Blob(["{}"]).stream(),
        duplex: "half"
      } as RequestInit)
      expect(answer.status, item.resource).toBe(402)
      const required = decodePaymentRequiredHeader(answer.headers.get("payment-required")!)
      const body = await answer.json() as { extensions: Record<string, unknown> }
      // The body always carries it; the header too while it stays within 8 KB (an operation
      // with large schemas, like the Messages API's, keeps it in the body only).
      expect(body.extensions["bazaar"], item.resource).toEqual(item.extensions.bazaar)
      if (required.extensions?.["bazaar"] === undefined) {
        const whole = { ...required, extensions: { ...required.extensions, bazaar: body.extensions["bazaar"] } }
        expect(Buffer.from(JSON.stringify(whole)).toString("base64").length, item.resource).toBeGreaterThan(8_000)
      } else expect(required.extensions["bazaar"], item.resource).toEqual(item.extensions.bazaar)
    }
  })

  it("the paid MCP tools are listed at /mcp, each with the bazaar's MCP declaration of its name and input schema", async () => {
    const tools = (await discovery()).items.filter((item) => item.type === "mcp")
    expect(tools.map((tool) => (tool.extensions.bazaar.info.input as { toolName: string }).toolName)).toEqual(
      expect.arrayContaining(["rpc", "parse_document", "chat_completion"])
    )
    for (const tool of tools) {
      expect(tool.resource).toBe(`${new URL(tool.resource).origin}/mcp`)
      expect(validateDiscoveryExtension(tool.extensions.bazaar)).toEqual({ valid: true })
    }
  })

  it("an operation of fixed price lists that price and what its 402 offers", async () => {
    const parser = (await discovery()).items.find((item) => item.resource.endsWith("/api/v1/augment/text-parser"))!
    expect(parser.price).toEqual({ priceUsd: expect.stringMatching(/^0\.\d+$/) })
    expect(parser.accepts.length).toBeGreaterThan(0)
  })
})

describe("GET /.well-known/x402 lists an embedder's declared endpoints with tollgate's operations", () => {
  it("a declared POST endpoint is listed with its fixed price and a JSON body, and its 402 carries that extension", async () => {
    const directory = Fs.mkdtempSync(Path.join(Os.tmpdir(), "tollgate-bazaar-"))
    const file = Path.join(directory, "config.json")
    Fs.writeFileSync(
      file,
      JSON.stringify({
        x402: {
          payTo: { evm: "0x1111111111111111111111111111111111111111" },
          relayerKey: Anvil.devPrivateKey,
          evmRpcUrl: "http://127.0.0.1:9"
        }
      })
    )
    const config = await Effect.runPromise(Config.load({ TOLLGATE_STORE: "memory", TOLLGATE_LOG_LEVEL: "none", TOLLGATE_CONFIG: file }))
    const tollgate = await Tollgate.make({
      config,
      announce: false,
      endpoints: [
        Tollgate.endpoint({ path: "/v1/summarize", sku: "summarize", price: { usd: "0.002" }, handle: async () => ({ json: {} }) })
      ]
    })
    try {
      const listed = await (await tollgate.fetch(new Request("http://localhost/.well-known/x402"))).json() as { items: ReadonlyArray<Item> }
      const own = listed.items.find((item) => item.resource.endsWith("/v1/summarize"))!
      expect(own).toMatchObject({ method: "POST", price: { priceUsd: "0.002" } })
      expect(own.extensions.bazaar.info.input).toMatchObject({ type: "http", method: "POST", bodyType: "json" })
      expect(validateDiscoveryExtension(own.extensions.bazaar)).toEqual({ valid: true })
      const answer = await tollgate.fetch(new Request("http://localhost/v1/summarize", { method: "POST", body: "{}" }))
      expect(answer.status).toBe(402)
      expect(decodePaymentRequiredHeader(answer.headers.get("payment-required")!).extensions?.["bazaar"]).toEqual(own.extensions.bazaar)
    } finally {
      await tollgate.dispose()
      Fs.rmSync(directory, { recursive: true, force: true })
    }
  })
})
