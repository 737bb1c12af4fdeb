/**
 * Paid MCP tools through the shipped server, driven by the official MCP SDK client over Streamable
 * HTTP: the tools and their prices, a call paid with an API key (charged once, as the HTTP route
 * charges it, and once more for nothing on a retry; every paid tool with a local backend, its usage
 * entry naming the tool), the free tools, a call paid per call with x402 in
 * `_meta["x402/payment"]` (`exact`, and `upto` for a chat) on anvil with FiatTokenV2_2, a wallet's
 * prepaid credit through SIWX, and the errors (a bad argument named, an unknown tool refused).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type CallToolResult, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Models } from "@tollgate/core"
import { FakeChatUpstream, ShippedServer } from "@tollgate/testkit"
import type { PaymentRequired } from "@x402/core/types"
import { registerExactEvmScheme } from "@x402/evm/exact/client"
import { UptoEvmScheme } from "@x402/evm/upto/client"
import { createSIWxPayload, encodeSIWxHeader } from "@x402/extensions/sign-in-with-x"
import { wrapFetchWithPayment, x402Client } from "@x402/fetch"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { maxUint256 } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as X402Chain from "../../http/test/support/X402Chain.ts"
import * as Usage from "./e2e/support/Usage.ts"

/** Anvil's third dev key: the relayer, so its nonces never race the test's own transactions. */
const RELAYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
const payTo = privateKeyToAccount(generatePrivateKey()).address

/** 1 nano-USD per input token and 2 per output token: a completion's charge is exact in USDC units. */
const PRICES = { inputPerMillionUsd: "1000", outputPerMillionUsd: "2000" }
const USAGE = { prompt_tokens: 10, completion_tokens: 2 }
/** 10 x 0.001 + 2 x 0.002 USD, in USDC units. */
const CHAT_CHARGE_UNITS = 14_000n
const FUNDS = 10_000_000n

let chain: X402Chain.Chain
let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer
/** A fake SearXNG instance (its JSON API) for web_search: three results about the query. */
let searxng: Http.Server

beforeAll(async () => {
  chain = await X402Chain.start()
  upstream = await FakeChatUpstream.start(() => ({ pieces: ["Hello", " there"], usage: USAGE }))
  searxng = Http.createServer((request, response) => {
    const query = new URL(request.url ?? "/", "http://searxng").searchParams.get("q") ?? ""
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
      results: [1, 2, 3].map((n) => ({ title: `${query} ${n}`, url: `https://example.com/${n}`, content: `About ${query}, part ${n}` }))
    }))
  })
  await new Promise<void>((resolve) => searxng.listen(0, "127.0.0.1", resolve))
  server = await ShippedServer.start({
    config: {
      models: [
        { id: "test-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] },
        ...Models.defaults.filter((model) => ["local-renderer", "dev-embedding", "dev-tts"].includes(model.id))
      ],
      chat: { searxngUrl: `http://127.0.0.1:${(searxng.address() as AddressInfo).port}`, scraping: true },
      prices: { chat: { "test-model": PRICES } },
      rpc: { upstreams: { "base-mainnet": [chain.anvil.url] } },
      x402: { payTo: { evm: payTo }, relayerKey: RELAYER_KEY, evmRpcUrl: chain.anvil.url }
    }
  })
}, 120_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await chain?.stop()
  await new Promise((resolve) => searxng?.close(resolve))
})

/** An MCP client connected to the server's `/mcp`, sending `headers` on every request. */
const connect = async (headers: Record<string, string> = {}) => {
  const client = new Client({ name: "tollgate-test", version: "1.0.0" })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.origin}/mcp`), { requestInit: { headers } }))
  return client
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const chatArguments = { model: "test-model", max_tokens: 100, messages: [{ role: "user", content: "hi" }] }

const call = (client: Client, name: string, args: Record<string, unknown>, meta?: Record<string, unknown>) =>
  client.callTool({ name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) }) as Promise<CallToolResult>

const fundedWallet = async () => {
  const wallet = privateKeyToAccount(generatePrivateKey())
  await chain.mint(wallet.address, FUNDS)
  return wallet
}

const paidBy = async (address: `0x${string}`) => FUNDS - (await chain.balanceOf(address))

const creditUnits = async (address: string) => {
  const { balanceUsd } = (await (await fetch(`${server.api}/x402/balance/${address}`)).json()) as { balanceUsd: string }
  return BigInt(Math.round(Number(balanceUsd) * 1_000_000))
}

describe("tools/list: every paid tool states its price in words and in _meta, every tool has an input schema", () => {
  it("chat_completion, embeddings, generate_image, speech, web_search, web_scrape, parse_document, rpc and the free tools", async () => {
    const client = await connect()
    const { tools } = await client.listTools()
    const names = tools.map((tool) => tool.name)
    expect(names).toEqual(expect.arrayContaining([
      "chat_completion",
      "embeddings",
      "generate_image",
      "speech",
      "web_search",
      "web_scrape",
      "parse_document",
      "rpc",
      "list_models",
      "list_networks",
      "balance",
      "recent_usage"
    ]))
    const chat = tools.find((tool) => tool.name === "chat_completion")!
    expect(chat.description).toContain("test-model 1000 USD input, 2000 USD output")
    expect(chat._meta).toEqual({
      "tollgate/price": {
        mode: "per_model",
        unit: "per million tokens",
        models: expect.objectContaining({ "test-model": { input: "1000", output: "2000" } })
      }
    })
    expect(chat.inputSchema).toMatchObject({ type: "object", properties: { model: expect.any(Object), messages: expect.any(Object) } })
    const parser = tools.find((tool) => tool.name === "parse_document")!
    expect(parser.description).toContain("Price: 0.01 USD per call.")
    expect(parser._meta).toEqual({ "tollgate/price": { mode: "flat", usd: "0.01" } })
    const rpc = tools.find((tool) => tool.name === "rpc")!
    expect(rpc.inputSchema).toMatchObject({
      type: "object",
      properties: { network: { enum: expect.arrayContaining(["base-mainnet"]) } },
      required: ["network", "method"]
    })
    for (const free of ["list_models", "list_networks", "balance", "recent_usage"]) {
      expect(tools.find((tool) => tool.name === free)!._meta).toBeUndefined()
    }
    await client.close()
  })
})

describe("An API key on the transport pays a tool call: charged once, what the HTTP route charges", () => {
  it("chat_completion: the answer, one usage entry naming the call's request id, the same amount as POST /chat/completions", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const result = await call(client, "chat_completion", chatArguments)
    expect(result.isError).toBeUndefined()
    expect(result.structuredContent).toMatchObject({ choices: [{ message: { content: "Hello there" } }] })
    const requestId = result._meta?.["tollgate/request-id"]
    const [entry] = await Usage.latest(server, 1)
    expect(entry?.inferenceDetails.requestId).toBe(requestId)

    const http = await fetch(`${server.api}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(server.credentials!.inferenceKey) },
      body: JSON.stringify(chatArguments)
    })
    expect(http.status).toBe(200)
    const [httpEntry, mcpEntry] = await Usage.latest(server, 2)
    expect(mcpEntry?.inferenceDetails.requestId).toBe(requestId)
    expect(mcpEntry?.nano).toBe(httpEntry?.nano)
    expect(mcpEntry?.nano).toBe(Number(CHAT_CHARGE_UNITS) * 1000)
    await client.close()
  })

  it("rpc with an idempotency-key in _meta: the retry is answered from the record and charged nothing more", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const meta = { "idempotency-key": `mcp-${Date.now()}` }
    const args = { network: "base-mainnet", method: "eth_blockNumber" }
    const first = await call(client, "rpc", args, meta)
    expect(first.isError).toBeUndefined()
    expect(first.structuredContent).toMatchObject({ jsonrpc: "2.0", id: 1, result: expect.stringMatching(/^0x/) })
    const [charged] = await Usage.latest(server, 1)
    expect(charged?.inferenceDetails.requestId).toBe(first._meta?.["tollgate/request-id"])
    expect(charged?.nano).toBeGreaterThan(0)
    const replay = await call(client, "rpc", args, meta)
    expect(replay.structuredContent).toEqual(first.structuredContent)
    const [latest] = await Usage.latest(server, 1)
    expect(latest?.inferenceDetails.requestId).toBe(charged?.inferenceDetails.requestId)
    await client.close()
  })
})

describe("A tool call's usage entry names the tool: GET /billing/usage-history shows which tool an entry paid for", () => {
  it("a key-paid parse_document call's entry notes MCP tool parse_document; the same request over HTTP names no tool", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const result = await call(client, "parse_document", {
      document: Buffer.from("Named by its tool.").toString("base64"),
      filename: "notes.txt"
    })
    expect(result.isError).toBeUndefined()
    const form = new FormData()
    form.append("file", new Blob(["Named by its tool."]), "notes.txt")
    const http = await fetch(`${server.api}/augment/text-parser`, {
      method: "POST",
      headers: bearer(server.credentials!.inferenceKey),
      body: form
    })
    expect(http.status).toBe(200)
    const [httpEntry, mcpEntry] = await Usage.latest(server, 2)
    expect(mcpEntry).toMatchObject({
      notes: expect.stringMatching(/^MCP tool parse_document(, |$)/),
      inferenceDetails: { requestId: result._meta?.["tollgate/request-id"] }
    })
    expect(httpEntry?.notes).not.toContain("MCP tool")
    expect(httpEntry?.nano).toBe(mcpEntry?.nano)
    await client.close()
  })
})

describe("A tool whose route answers an image answers MCP image content", () => {
  it("generate_image with local-renderer: one image content block, its bytes the PNG the route renders", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const result = await call(client, "generate_image", { model: "local-renderer", prompt: "a lighthouse", width: 64, height: 64 })
    expect(result.isError).toBeUndefined()
    const [image] = result.content as Array<{ type: string; data: string; mimeType: string }>
    expect(image).toMatchObject({ type: "image", mimeType: expect.stringMatching(/^image\//) })
    expect(Buffer.from(image!.data, "base64").length).toBeGreaterThan(0)
    await client.close()
  })
})

/**
 * Calls a paid tool with the server's inference key, then its route over HTTP with the same body:
 * the tool's call is the one entry written in between, naming the tool, charged what the route is.
 */
const chargedAsHttp = async (name: string, args: Record<string, unknown>, path: string) => {
  const client = await connect(bearer(server.credentials!.inferenceKey))
  const [before] = await Usage.latest(server, 1)
  const result = await call(client, name, args)
  await client.close()
  expect(result.isError).toBeUndefined()
  const http = await fetch(`${server.api}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...bearer(server.credentials!.inferenceKey) },
    body: JSON.stringify(args)
  })
  expect(http.status).toBe(200)
  await http.arrayBuffer()
  const [httpEntry, toolEntry, earlier] = await Usage.latest(server, 3)
  expect(earlier?.inferenceDetails.requestId).toBe(before?.inferenceDetails.requestId)
  expect(toolEntry).toMatchObject({
    sku: httpEntry?.sku,
    nano: httpEntry?.nano,
    notes: expect.stringMatching(new RegExp(`^MCP tool ${name}(, |$)`)),
    inferenceDetails: { requestId: result._meta?.["tollgate/request-id"] }
  })
  expect(toolEntry?.nano).toBeGreaterThan(0)
  return result
}

describe("Every paid tool answers its route's result and is charged once, what its HTTP route charges for the same request", () => {
  it("embeddings: the vectors as JSON", async () => {
    const result = await chargedAsHttp("embeddings", { model: "dev-embedding", input: ["a lighthouse", "a harbour"] }, "/embeddings")
    expect(result.structuredContent).toMatchObject({
      object: "list",
      model: "dev-embedding",
      data: [{ object: "embedding", index: 0, embedding: expect.any(Array) }, {
        object: "embedding",
        index: 1,
        embedding: expect.any(Array)
      }]
    })
  })

  it("speech: one MCP audio content block, a WAV", async () => {
    const result = await chargedAsHttp("speech", {
      model: "dev-tts",
      input: "Hello from the lighthouse.",
      voice: "alloy",
      response_format: "wav"
    }, "/audio/speech")
    const [audio] = result.content as Array<{ type: string; data: string; mimeType: string }>
    expect(audio).toMatchObject({ type: "audio", mimeType: expect.stringMatching(/^audio\//) })
    expect(Buffer.from(audio!.data, "base64").subarray(0, 4).toString("latin1")).toBe("RIFF")
  })

  it("web_search: the provider's results, at the flat search price", async () => {
    const result = await chargedAsHttp("web_search", { query: "lighthouses", limit: 2 }, "/augment/search")
    expect(result.structuredContent).toEqual({
      query: "lighthouses",
      results: [
        { title: "lighthouses 1", url: "https://example.com/1", content: "About lighthouses, part 1", date: null },
        { title: "lighthouses 2", url: "https://example.com/2", content: "About lighthouses, part 2", date: null }
      ]
    })
    const [entry] = await Usage.latest(server, 2).then((entries) => entries.slice(1))
    expect(entry).toMatchObject({ sku: "augment-search", nano: 10_000_000 })
  })
})

describe("web_scrape keeps the scraper's rules: a private target is an isError result naming url, and not charged", () => {
  it("a loopback url (the only pages this machine serves): the route's 400 details, no usage entry", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const [before] = await Usage.latest(server, 1)
    const result = await call(client, "web_scrape", { url: `http://127.0.0.1:${(searxng.address() as AddressInfo).port}/` })
    expect(result.isError).toBe(true)
    expect(result.structuredContent).toMatchObject({ details: { url: { _errors: [expect.stringContaining("is not a public host")] } } })
    const [after] = await Usage.latest(server, 1)
    expect(after?.inferenceDetails.requestId).toBe(before?.inferenceDetails.requestId)
    await client.close()
  })
})

describe("The free tools answer what their routes answer and charge nothing: list_models, list_networks, balance, recent_usage", () => {
  it("a key caller: the models with prices, the networks, the account's balance and its newest entries", async () => {
    const client = await connect(bearer(server.credentials!.adminKey))
    const [before] = await Usage.latest(server, 1)
    const models = await call(client, "list_models", {})
    expect(models.isError).toBeUndefined()
    expect(models.structuredContent).toMatchObject({
      object: "list",
      data: expect.arrayContaining([expect.objectContaining({ id: "test-model" })])
    })
    const networks = await call(client, "list_networks", {})
    expect(networks.isError).toBeUndefined()
    expect(JSON.stringify(networks.structuredContent)).toContain("base-mainnet")
    const balance = await call(client, "balance", {})
    expect(balance.structuredContent).toMatchObject({ canConsume: true, balances: { usd: expect.any(Number) } })
    const usage = await call(client, "recent_usage", { limit: 1 })
    expect(usage.structuredContent).toMatchObject({ data: [{ inferenceDetails: { requestId: before?.inferenceDetails.requestId } }] })
    const [after] = await Usage.latest(server, 1)
    expect(after?.inferenceDetails.requestId).toBe(before?.inferenceDetails.requestId)
    await client.close()
  })
})

describe("parse_document takes the document as an MCP embedded resource too", () => {
  it("a text resource: its text extracted and charged the flat 0.01 USD", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const resource = { uri: "file:///notes.txt", mimeType: "text/plain", text: "Quarterly figures: revenue rose." }
    const result = await call(client, "parse_document", { resource })
    expect(result.isError).toBeUndefined()
    expect(result.structuredContent).toMatchObject({ text: expect.stringContaining("revenue rose") })
    const [entry] = await Usage.latest(server, 1)
    expect(entry).toMatchObject({ nano: 10_000_000, inferenceDetails: { requestId: result._meta?.["tollgate/request-id"] } })
    const missing = await call(client, "parse_document", {})
    expect(missing.isError).toBe(true)
    expect(missing.structuredContent).toMatchObject({ details: { document: { _errors: [expect.any(String)] } } })
    await client.close()
  })
})

describe("A bad argument is an isError result naming the field, an unknown tool the protocol's invalid-params error; neither is charged", () => {
  it("chat_completion without messages names messages; no tool named nope is InvalidParams", async () => {
    const client = await connect(bearer(server.credentials!.inferenceKey))
    const [before] = await Usage.latest(server, 1)
    const bad = await call(client, "chat_completion", { model: "test-model" })
    expect(bad.isError).toBe(true)
    expect(bad.structuredContent).toMatchObject({
      error: expect.stringContaining("messages"),
      details: { messages: { _errors: [expect.any(String)] } }
    })
    const unknown = await call(client, "nope", {}).then(() => undefined, (error: unknown) => error)
    expect(unknown).toBeInstanceOf(McpError)
    expect((unknown as McpError).code).toBe(ErrorCode.InvalidParams)
    const [after] = await Usage.latest(server, 1)
    expect(after?.inferenceDetails.requestId).toBe(before?.inferenceDetails.requestId)
    await client.close()
  })
})

describe("A call with no credentials gets x402's PaymentRequired tool result: the 402's accepts, top-up and SIWX challenge", () => {
  it("parse_document without payment: isError, structuredContent the PaymentRequired, content[0] its JSON", async () => {
    const client = await connect()
    const result = await call(client, "parse_document", {
      document: Buffer.from("Quarterly figures.").toString("base64"),
      filename: "notes.txt"
    })
    expect(result.isError).toBe(true)
    const required = result.structuredContent as unknown as PaymentRequired
    expect(required).toMatchObject({
      x402Version: 2,
      accepts: [{ scheme: "exact", amount: "10000", payTo }, { scheme: "exact", amount: "5000000" }]
    })
    expect(required.extensions?.["sign-in-with-x"]).toEqual(expect.any(Object))
    expect(JSON.parse((result.content as Array<{ text: string }>)[0]!.text)).toEqual(required)
    await client.close()
  })
})

/** The PaymentRequired of a tool called with no credentials. */
const paymentRequired = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await call(client, name, args)
  expect(result.isError).toBe(true)
  return result.structuredContent as unknown as PaymentRequired
}

describe("x402 per call in _meta[\"x402/payment\"], built by the official clients: exact moves the entry's amount, upto only what the call used", () => {
  it("parse_document paid exact: 0.01 USDC leaves the payer, the result carries x402/payment-response", async () => {
    const wallet = await fundedWallet()
    const client = await connect()
    const args = { document: Buffer.from("Quarterly figures: revenue rose.").toString("base64"), filename: "notes.txt" }
    const payer = new x402Client()
    registerExactEvmScheme(payer, { signer: wallet })
    const payment = await payer.createPaymentPayload(await paymentRequired(client, "parse_document", args))
    const result = await call(client, "parse_document", args, { "x402/payment": payment })
    expect(result.isError).toBeUndefined()
    expect(result.structuredContent).toMatchObject({ text: expect.stringContaining("revenue rose") })
    expect(result._meta?.["x402/payment-response"]).toMatchObject({
      success: true,
      payer: wallet.address,
      transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/)
    })
    expect(await paidBy(wallet.address)).toBe(BigInt(payment.accepted.amount))
    expect(payment.accepted.amount).toBe("10000")
    await client.close()
  }, 60_000)

  it("chat_completion paid upto: the payer signs the worst case, exactly the charge leaves it, no credit is left", async () => {
    const wallet = await fundedWallet()
    await chain.approvePermit2(wallet, maxUint256)
    const client = await connect()
    const payer = new x402Client().register("eip155:*", new UptoEvmScheme(wallet))
    const required = await paymentRequired(client, "chat_completion", chatArguments)
    expect(required.accepts[0]).toMatchObject({ scheme: "upto", payTo })
    const payment = await payer.createPaymentPayload(required)
    expect(BigInt(payment.accepted.amount)).toBeGreaterThan(CHAT_CHARGE_UNITS)
    const result = await call(client, "chat_completion", chatArguments, { "x402/payment": payment })
    expect(result.isError).toBeUndefined()
    expect(result._meta?.["x402/payment-response"]).toMatchObject({
      success: true,
      payer: wallet.address,
      amount: String(CHAT_CHARGE_UNITS)
    })
    expect(await paidBy(wallet.address)).toBe(CHAT_CHARGE_UNITS)
    expect(await creditUnits(wallet.address)).toBe(0n)
    await client.close()
  }, 60_000)
})

/** A funded wallet that topped up the minimum (5 USD) with @x402/fetch: its prepaid credit. */
const toppedUpWallet = async () => {
  const wallet = await fundedWallet()
  const payer = new x402Client().setSpendControls({ maxAmountPerPayment: "$100" })
  registerExactEvmScheme(payer, { signer: wallet })
  const topUp = await wrapFetchWithPayment(fetch, payer)(`${server.api}/x402/top-up`, { method: "POST" })
  expect(topUp.status).toBe(200)
  expect(await paidBy(wallet.address)).toBe(5_000_000n)
  return wallet
}

const documentArguments = { document: Buffer.from("Paid from credit.").toString("base64"), filename: "notes.txt" }

/** A SIWX proof for `_meta["sign-in-with-x"]`, over the challenge of a payment-required result (each proof is used once). */
const signedIn = async (client: Client, wallet: ReturnType<typeof privateKeyToAccount>) => {
  const challenge = (await paymentRequired(client, "parse_document", documentArguments)).extensions!["sign-in-with-x"] as {
    info: Record<string, unknown>
  }
  const proof = await createSIWxPayload(
    { ...challenge.info, chainId: "eip155:8453", type: "eip191" } as never,
    wallet,
    `${server.origin.replace("127.0.0.1", "localhost")}/mcp`
  )
  return { "sign-in-with-x": encodeSIWxHeader(proof) }
}

describe("A wallet's prepaid credit pays tool calls through SIWX: two calls from one top-up, one settlement", () => {
  it(
    "top-up 5 USD with @x402/fetch, then two parse_document calls signed in via _meta: 0.01 USD each from credit, nothing more on chain",
    async () => {
      const wallet = await toppedUpWallet()
      const client = await connect()
      const args = documentArguments
      for (let n = 1; n <= 2; n++) {
        const result = await call(client, "parse_document", args, await signedIn(client, wallet))
        expect(result.isError).toBeUndefined()
        expect(result._meta?.["x402/payment-response"]).toBeUndefined()
        expect(await creditUnits(wallet.address)).toBe(5_000_000n - BigInt(n) * 10_000n)
      }
      expect(await paidBy(wallet.address)).toBe(5_000_000n)
      await client.close()
    },
    60_000
  )
})

describe("A wallet signed in with SIWX reads its own balance and recent usage over MCP, as a key reads its account's", () => {
  it(
    "after one parse_document paid from credit: balance 4.99 USD, recent_usage that one entry naming the tool; nothing charged for either",
    async () => {
      const wallet = await toppedUpWallet()
      const client = await connect()
      const paid = await call(client, "parse_document", documentArguments, await signedIn(client, wallet))
      expect(paid.isError).toBeUndefined()
      const balance = await call(client, "balance", {}, await signedIn(client, wallet))
      expect(balance.isError).toBeUndefined()
      expect(balance.structuredContent).toMatchObject({ canConsume: true, consumptionCurrency: "USD", balances: { usd: 4.99 } })
      const usage = await call(client, "recent_usage", { limit: 5 }, await signedIn(client, wallet))
      expect(usage.isError).toBeUndefined()
      expect(usage.structuredContent).toMatchObject({
        data: [{
          sku: "text-parser",
          amount: 0.01,
          notes: expect.stringMatching(/^MCP tool parse_document/),
          inferenceDetails: { requestId: paid._meta?.["tollgate/request-id"] }
        }],
        hasMore: false
      })
      expect(await creditUnits(wallet.address)).toBe(5_000_000n - 10_000n)
      const anonymous = await call(client, "recent_usage", {})
      expect(anonymous).toMatchObject({ isError: true, structuredContent: { error: expect.stringContaining("SIGN-IN-WITH-X") } })
      await client.close()
    },
    60_000
  )
})

describe("TOLLGATE_MCP=off turns the MCP server off: /mcp is a 404", () => {
  it("POST /mcp on a server started with TOLLGATE_MCP=off answers the StandardError 404", async () => {
    const off = await ShippedServer.start({ env: { TOLLGATE_MCP: "off" } })
    try {
      const response = await fetch(`${off.origin}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
      expect(response.status).toBe(404)
      expect(await response.json()).toEqual({ error: expect.any(String) })
    } finally {
      await off.stop()
    }
  }, 120_000)
})
