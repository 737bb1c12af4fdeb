/**
 * One end-to-end test per endpoint of the spec, against a shipped server (`ShippedServer`) that
 * holds keys: dev mode's demo account or a production account provisioned with the CLI. The same
 * suite runs in every mode and store; each test file starts its server and passes it here.
 * Everything goes over HTTP with the clients users use: fetch, viem, the openai SDK.
 */
import type { ShippedServer } from "@tollgate/testkit"
import OpenAI from "openai"
import Sharp from "sharp"
import { createPublicClient, http } from "viem"
import { describe, expect, it } from "vitest"

/** What the suite needs from the file that started the server. */
export interface Target {
  readonly server: ShippedServer.ShippedServer
  /** A chat model of the server's model list. */
  readonly chatModel: string
  /** What the chat model answers to "Say hello". */
  readonly chatReply: RegExp
  /** A network whose upstream is the test's anvil (chain id 8453). */
  readonly network: string
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

export const suite = (name: string, target: () => Target) =>
  describe(`${name}: every endpoint of the spec answers through the shipped server`, () => {
    const server = () => target().server
    const keys = () => server().credentials!
    const get = (path: string, key?: string, headers: Record<string, string> = {}) =>
      fetch(`${server().api}${path}`, { headers: { ...(key === undefined ? {} : bearer(key)), ...headers } })
    const post = (path: string, body: unknown, key?: string) =>
      fetch(`${server().api}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(key === undefined ? {} : bearer(key)) },
        body: JSON.stringify(body)
      })

    it("GET /crypto/rpc/networks lists the slugs, sorted, with no credentials", async () => {
      const response = await get("/crypto/rpc/networks")
      expect(response.status).toBe(200)
      const { networks } = await response.json() as { networks: Array<string> }
      expect(networks).toContain("base-mainnet")
      expect(networks).toEqual([...networks].sort())
    })

    it("POST /crypto/rpc/{network}: viem's http transport reads the chain through the proxy", async () => {
      const client = createPublicClient({
        transport: http(`${server().api}/crypto/rpc/${target().network}`, { fetchOptions: { headers: bearer(keys().inferenceKey) } })
      })
      expect(await client.getChainId()).toBe(8453)
      expect(await client.getBlockNumber()).toBeGreaterThanOrEqual(0n)
      expect(await client.getBalance({ address: "0x0000000000000000000000000000000000000001" })).toBeGreaterThanOrEqual(0n)
      const response = await post(`/crypto/rpc/${target().network}`, [
        { jsonrpc: "2.0", id: 1, method: "eth_chainId" },
        { jsonrpc: "2.0", id: 2, method: "eth_blockNumber" }
      ], keys().inferenceKey)
      expect(response.status).toBe(200)
      expect(Number(response.headers.get("x-service-rpc-credits"))).toBeGreaterThan(0)
      expect((await response.json() as Array<{ id: number }>).map((item) => item.id)).toEqual([1, 2])
    })

    it("GET /models lists the chat model", async () => {
      const response = await get("/models?type=text")
      expect(response.status).toBe(200)
      const { data } = await response.json() as { data: Array<{ id: string }> }
      expect(data.map((model) => model.id)).toContain(target().chatModel)
    })

    it("POST /image/generate returns a PNG, base64", async () => {
      const response = await post(
        "/image/generate",
        { model: "local-renderer", prompt: "a lighthouse at dusk", width: 64, height: 64, format: "png" },
        keys().inferenceKey
      )
      expect(response.status).toBe(200)
      const body = await response.json() as { id: string; images: Array<string> }
      expect(body.id).toEqual(expect.any(String))
      expect(Buffer.from(body.images[0]!, "base64").subarray(1, 4).toString()).toBe("PNG")
    })

    it("POST /chat/completions: the openai SDK gets a completion and a stream", async () => {
      const openai = new OpenAI({ apiKey: keys().inferenceKey, baseURL: server().api, maxRetries: 0 })
      const completion = await openai.chat.completions.create({
        model: target().chatModel,
        messages: [{ role: "user", content: "Say hello" }]
      })
      expect(completion.choices[0]!.message.content).toMatch(target().chatReply)
      const stream = await openai.chat.completions.create({
        model: target().chatModel,
        messages: [{ role: "user", content: "Say hello" }],
        stream: true
      })
      let text = ""
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
      expect(text).toMatch(target().chatReply)
    })

    it("GET /models/{id}, /models/traits and /models/compatibility_mapping: the openai SDK retrieves the chat model", async () => {
      const openai = new OpenAI({ apiKey: keys().inferenceKey, baseURL: server().api, maxRetries: 0 })
      expect(await openai.models.retrieve(target().chatModel)).toMatchObject({ id: target().chatModel, object: "model", type: "text" })
      for (const path of ["/models/traits", "/models/compatibility_mapping"]) {
        const response = await get(path)
        expect(response.status).toBe(200)
        expect(await response.json()).toMatchObject({ object: "list", type: "text", data: expect.any(Object) })
      }
    })

    it("POST /images/generations: the openai SDK gets a decodable image", async () => {
      const openai = new OpenAI({ apiKey: keys().inferenceKey, baseURL: server().api, maxRetries: 0 })
      const { data } = await openai.images.generate({
        model: "local-renderer",
        prompt: "a lighthouse",
        size: "256x256",
        response_format: "b64_json"
      })
      expect(await Sharp(Buffer.from(data![0]!.b64_json!, "base64")).metadata()).toMatchObject({ format: "png", width: 256, height: 256 })
    })

    it("POST /responses: the openai SDK gets output_text and usage, and a stream of Responses events", async () => {
      const openai = new OpenAI({ apiKey: keys().inferenceKey, baseURL: server().api, maxRetries: 0 })
      const response = await openai.responses.create({ model: target().chatModel, input: "Say hello" })
      expect(response.output_text).toMatch(target().chatReply)
      expect(response.usage!.output_tokens).toBeGreaterThan(0)
      const stream = await openai.responses.create({ model: target().chatModel, input: "Say hello", stream: true })
      let text = ""
      let completed = false
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") text += event.delta
        if (event.type === "response.completed") completed = event.response.usage !== null
      }
      expect(text).toMatch(target().chatReply)
      expect(completed).toBe(true)
    })

    it("POST /image/upscale, /image/edit, /image/background-remove and GET /image/styles", async () => {
      const png = await Sharp({ create: { width: 64, height: 64, channels: 3, background: "#ffffff" } }).png().toBuffer()
      const upload = (fields: Record<string, string>) => {
        const form = new FormData()
        form.append("image", new Blob([new Uint8Array(png)], { type: "image/png" }), "white.png")
        for (const [name, value] of Object.entries(fields)) form.append(name, value)
        return form
      }
      for (
        const [path, fields, size] of [
          ["/image/upscale", { scale: "2" }, 128],
          ["/image/edit", { prompt: "black and white", model: "local-renderer" }, 64],
          ["/image/background-remove", {}, 64]
        ] as const
      ) {
        const response = await fetch(`${server().api}${path}`, {
          method: "POST",
          headers: bearer(keys().inferenceKey),
          body: upload(fields)
        })
        expect(response.status, path).toBe(200)
        expect(await Sharp(Buffer.from(await response.arrayBuffer())).metadata(), path).toMatchObject({ width: size, height: size })
      }
      expect(await (await get("/image/styles")).json()).toMatchObject({ object: "list", data: expect.arrayContaining(["Anime"]) })
    })

    it("POST /image/multi-edit: a base image and a layer, as FormData, come back as one edited image", async () => {
      const form = new FormData()
      for (const background of ["#ffffff", "#000000"]) {
        const png = await Sharp({ create: { width: 256, height: 256, channels: 3, background } }).png().toBuffer()
        form.append("images", new Blob([new Uint8Array(png)], { type: "image/png" }), "layer.png")
      }
      form.append("prompt", "black and white")
      form.append("modelId", "local-renderer")
      const response = await fetch(`${server().api}/image/multi-edit`, { method: "POST", headers: bearer(keys().inferenceKey), body: form })
      expect(response.status).toBe(200)
      expect(await Sharp(Buffer.from(await response.arrayBuffer())).metadata()).toMatchObject({ format: "png", width: 256, height: 256 })
    })

    it("GET /audio/voices and POST /audio/quote, /audio/queue, /audio/retrieve, /audio/complete: a queued speech job's WAV", async () => {
      expect(await (await get("/audio/voices?model=dev-tts")).json()).toEqual({
        object: "list",
        data: [{ model: "dev-tts", voices: ["alloy", "echo", "nova"], default_voice: "alloy" }]
      })
      expect(await (await post("/audio/quote", { model: "dev-tts", character_count: 1000 })).json()).toEqual({ quote: 0.015 })
      const queued = await post("/audio/queue", { model: "dev-tts", prompt: "Hello there.", voice: "echo" }, keys().inferenceKey)
      expect(queued.status).toBe(200)
      const { queue_id } = await queued.json() as { queue_id: string }
      const audio = await post("/audio/retrieve", { model: "dev-tts", queue_id }, keys().inferenceKey)
      expect(audio.status).toBe(200)
      expect(audio.headers.get("content-type")).toBe("audio/wav")
      expect(Buffer.from(await audio.arrayBuffer()).subarray(0, 4).toString("ascii")).toBe("RIFF")
      expect(await (await post("/audio/complete", { model: "dev-tts", queue_id }, keys().inferenceKey)).json()).toEqual({ success: true })
      expect((await post("/audio/retrieve", { model: "dev-tts", queue_id }, keys().inferenceKey)).status).toBe(404)
    })

    it("GET /characters lists the configured characters (none here); /augment/search without a provider is a 400 saying so", async () => {
      expect(await (await get("/characters")).json()).toEqual({ object: "list", data: [] })
      const search = await post("/augment/search", { query: "lighthouses" }, keys().inferenceKey)
      expect(search.status).toBe(400)
      expect(await search.json()).toEqual({ error: "Web search is not configured on this server" })
    })

    it("POST /augment/text-parser: a FormData upload of a text file comes back as its text", async () => {
      const form = new FormData()
      form.append("file", new Blob(["Hello from a text file.\n"], { type: "text/plain" }), "hello.txt")
      const response = await fetch(`${server().api}/augment/text-parser`, {
        method: "POST",
        headers: bearer(keys().inferenceKey),
        body: form
      })
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ text: "Hello from a text file.\n", tokens: expect.any(Number) })
    })

    it("GET /billing/usage-history lists the call just made, with its amount; the deprecated /billing/usage is 410 for a new account", async () => {
      const image = async () => {
        const response = await post(
          "/image/generate",
          { model: "local-renderer", prompt: "a ledger entry", width: 64, height: 64, format: "png" },
          keys().inferenceKey
        )
        expect(response.status).toBe(200)
        await response.arrayBuffer()
        return response
      }
      const call = await image()
      // The balance a second call starts from says what the first one cost.
      const charged = Number(call.headers.get("x-service-balance-usd")) - Number((await image()).headers.get("x-service-balance-usd"))
      expect(charged).toBeGreaterThan(0)
      const history = await get("/billing/usage-history?limit=50", keys().adminKey)
      expect(history.status).toBe(200)
      const { data } = await history.json() as {
        data: Array<{ sku: string; amount: number; currency: string; inferenceDetails: { requestId: string } }>
      }
      const entry = data.find((row) => row.inferenceDetails.requestId === call.headers.get("x-request-id"))
      expect(entry).toMatchObject({ currency: "USD", sku: expect.stringContaining("local-renderer") })
      expect(entry!.amount).toBeCloseTo(charged, 9)
      const deprecated = await get("/billing/usage", keys().adminKey)
      expect(deprecated.status).toBe(410)
      expect(await deprecated.json()).toEqual({ error: expect.any(String) })
    })

    it("POST /billing/credits: an operator's ADMIN key grants credit, once per reference", async () => {
      const grant = { accountId: keys().accountId, amountUsd: "1.50", reference: `e2e-${Date.now()}` }
      const first = await post("/billing/credits", grant, keys().adminKey)
      expect(first.status).toBe(200)
      const granted = await first.json() as { balanceUsd: string; entryId: string }
      expect(granted).toMatchObject({
        accountId: keys().accountId,
        amountUsd: "1.5",
        reference: grant.reference,
        entryId: expect.any(String)
      })
      // The retry answers the same grant: same entry, and the balance did not grow a second time.
      const retry = await post("/billing/credits", grant, keys().adminKey)
      expect(retry.status).toBe(200)
      expect(await retry.json()).toEqual(granted)
      const limits = await (await get("/api_keys/rate_limits", keys().adminKey)).json() as { balances: { usd: string } }
      expect(limits.balances.usd).toBe(granted.balanceUsd)
      // The reference is spent: another amount under it is refused.
      const conflict = await post("/billing/credits", { ...grant, amountUsd: "2.00" }, keys().adminKey)
      expect(conflict.status).toBe(409)
      expect(await conflict.json()).toEqual({ error: "This reference was already used for another grant" })
    })

    it("POST, GET and DELETE /api_keys: a minted key works until it is revoked", async () => {
      const created = await post("/api_keys", { apiKeyType: "INFERENCE", description: "e2e" }, keys().adminKey)
      expect(created.status).toBe(201)
      const { apiKey, id } = await created.json() as { apiKey: string; id: string }
      expect((await get("/api_keys/rate_limits", apiKey)).status).toBe(200)
      const listed = await get("/api_keys", keys().adminKey)
      expect((await listed.json() as { data: Array<{ id: string }> }).data.map((key) => key.id)).toContain(id)
      const revoked = await fetch(`${server().api}/api_keys?id=${id}`, { method: "DELETE", headers: bearer(keys().adminKey) })
      expect(revoked.status).toBe(200)
      expect((await get("/api_keys/rate_limits", apiKey)).status).toBe(401)
    })

    it("GET /api_keys/rate_limits and /api_keys/rate_limit_logs answer the caller's own", async () => {
      const limits = await get("/api_keys/rate_limits", keys().inferenceKey)
      expect(limits.status).toBe(200)
      expect(await limits.json()).toMatchObject({ accountId: keys().accountId })
      const logs = await get("/api_keys/rate_limit_logs", keys().inferenceKey)
      expect(logs.status).toBe(200)
      // No call of this suite hits a limit: the log is there, and empty.
      expect(await logs.json()).toEqual({ data: [] })
    })

    it("POST /x402/top-up without a payment answers 402 with the USDC options", async () => {
      const response = await fetch(`${server().api}/x402/top-up`, { method: "POST" })
      expect(response.status).toBe(402)
      const body = await response.json() as { accepts: Array<{ network: string }> }
      expect(body.accepts.map((accept) => accept.network)).toContain("eip155:8453")
    })

    it("GET /x402/top-up, the top-up link a 402 gives, says how to top up: the steps and the minimum top-up's USDC options", async () => {
      const response = await get("/x402/top-up")
      expect(response.status).toBe(200)
      const guide = await response.json() as { enabled: boolean; steps: Array<string>; accepts: Array<{ network: string }> }
      expect(guide).toMatchObject({ enabled: true, method: "POST", url: expect.stringMatching(/\/api\/v1\/x402\/top-up$/) })
      expect(guide.steps).toHaveLength(3)
      expect(guide.accepts.map((accept) => accept.network)).toContain("eip155:8453")
    })

    it("GET /x402/balance/{walletAddress} answers a wallet's balance", async () => {
      const response = await get("/x402/balance/0x000000000000000000000000000000000000dEaD")
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ balanceUsd: expect.any(String), currency: "USD" })
    })
  })
