import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Host from "./support/Host.ts"

const { nano } = Host

const TOKEN_NANO = 10_000

/** The summaries' own limit the hosts are started with. */
const SUMMARIZE_RPM = 8

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const json = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(body)
})

interface UsageEntry {
  readonly sku: string
  readonly unit: number
  readonly amount: number
  readonly inferenceDetails: { readonly requestId: string; readonly completionTokens?: number }
}

describe.each(["node-http", "express", "fastify", "hono", "fetch"])(
  "examples/own-endpoint/%s.ts: own paid endpoints beside tollgate's API, on one ledger",
  (name) => {
    let host: Host.Host
    beforeAll(async () => {
      host = await Host.start(name, { SUMMARIZE_RPM: String(SUMMARIZE_RPM), TOLLGATE_LOG_LEVEL: "info", TOLLGATE_METRICS: "open" })
    }, 90_000)
    afterAll(() => host?.stop())

    /** The account's balance as tollgate's own API reports it, once no hold is open. */
    const balance = async (): Promise<number> => {
      for (;;) {
        const response = await fetch(`${host.origin}/api/v1/api_keys/rate_limits`, { headers: bearer(host.inferenceKey) })
        const { balances } = await response.json() as { balances: { usd: string; heldUsd: string } }
        if (nano(balances.heldUsd) === 0) return nano(balances.usd)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }

    const usage = async (requestId: string): Promise<UsageEntry | undefined> => {
      const response = await fetch(`${host.origin}/api/v1/billing/usage-history?limit=50`, { headers: bearer(host.adminKey) })
      const { data } = await response.json() as { data: ReadonlyArray<UsageEntry> }
      return data.find((entry) => entry.inferenceDetails.requestId === requestId)
    }

    it("POST /v1/summarize with the dev key: 200 with x-ratelimit-* headers, exactly 0.002 USD charged, a usage entry under its sku", async () => {
      const before = await balance()
      const response = await fetch(`${host.origin}/v1/summarize`, json({ text: "the quick brown fox" }, bearer(host.inferenceKey)))
      expect(response.status).toBe(200)
      expect(await response.json()).toEqual({ summary: "the quick brown fox" })
      expect(response.headers.get("x-ratelimit-limit-requests")).toBe(String(SUMMARIZE_RPM))
      expect(response.headers.get("x-ratelimit-remaining-requests")).toMatch(/^\d+$/)
      expect(nano(response.headers.get("x-service-balance-usd")!)).toBe(before)
      expect(await balance()).toBe(before - 2_000_000)
      const entry = await usage(response.headers.get("x-request-id")!)
      expect(entry).toMatchObject({ sku: "summarize", unit: 1, amount: 0.002 })
    })

    it("without credentials both endpoints answer the discovery 402 (x402Version, accepts, sign-in-with-x) with PAYMENT-REQUIRED", async () => {
      for (const [path, body] of [["/v1/summarize", { text: "hi" }], ["/v1/generate", { prompt: "hi", max_tokens: 5 }]] as const) {
        const response = await fetch(`${host.origin}${path}`, json(body))
        expect(response.status).toBe(402)
        const discovery = await response.json() as Record<string, unknown>
        expect(discovery).toMatchObject({
          x402Version: 2,
          accepts: expect.any(Array),
          extensions: { "sign-in-with-x": expect.any(Object) }
        })
        const header = JSON.parse(Buffer.from(response.headers.get("payment-required")!, "base64").toString()) as Record<string, unknown>
        expect(header).toMatchObject({ x402Version: 2, resource: { url: expect.stringContaining(path) } })
      }
    })

    it("every link of the 402 body, the pages and what they load answer 200 through the host (the endpoint its 402); the top-up link says how to pay in dev mode", async () => {
      const response = await fetch(`${host.origin}/v1/summarize`, json({ text: "hi" }))
      expect(response.status).toBe(402)
      const links = Host.links(await response.json())
      // The origin (SIWX's), the pages, the top-up and the resource itself.
      expect(links).toEqual(["/", "/api-keys", "/api/v1/x402/top-up", "/docs/authentication", "/docs/wallets", "/v1/summarize"])
      const portal = await (await fetch(`${host.origin}/api-keys`)).text()
      const assets = [...portal.matchAll(/(?:src|href)="(portal\/[^"]+)"/gu)].map((match) => `/${match[1]}`)
      expect(assets).toEqual(["/portal/portal.css", "/portal/portal.js"])
      for (const path of ["/docs", "/api/v1/openapi.json", ...assets, ...links]) {
        // The endpoint answers a POST without payment with its 402.
        if (path === "/v1/summarize") {
          expect((await fetch(`${host.origin}${path}`, json({ text: "hi" }))).status, path).toBe(402)
          continue
        }
        const page = await fetch(`${host.origin}${path}`)
        expect(page.status, path).toBe(200)
        await page.arrayBuffer()
      }
      // Dev mode with no x402.payTo (wallet.test.ts sets one): the top-up link says wallet payments
      // are off, what turns them on, and where to get the API key that pays meanwhile.
      const guide = await (await fetch(`${host.origin}/api/v1/x402/top-up`)).json()
      expect(guide).toMatchObject({
        enabled: false,
        description: expect.stringContaining("x402.payTo"),
        accepts: [],
        apiKey: { header: "Authorization", getKey: expect.stringMatching(/\/api-keys$/) }
      })
      // The host's own routes stay the host's (node:http and fetch give tollgate every request).
      if (name !== "node-http" && name !== "fetch") expect(await (await fetch(`${host.origin}/health`)).json()).toEqual({ ok: true })
    })

    it("/mcp answers through the host: the MCP SDK client lists both endpoints as tools", async () => {
      const client = new Client({ name: "own-endpoint-test", version: "1.0.0" })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${host.origin}/mcp`)))
      const { tools } = await client.listTools()
      expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["summarize", "generate", "chat_completion"]))
      await client.close()
    })

    it("a body without text is a 400 DetailedError naming text, and charges nothing", async () => {
      const before = await balance()
      const response = await fetch(`${host.origin}/v1/summarize`, json({ txt: "hello" }, bearer(host.inferenceKey)))
      expect(response.status).toBe(400)
      expect(await response.json()).toEqual({
        error: "Invalid request parameters: text: Invalid input: expected string, received undefined",
        details: { _errors: [], text: { _errors: [expect.any(String)] } }
      })
      expect(await balance()).toBe(before)
    })

    it("a repeated Idempotency-Key returns the same body with Idempotent-Replayed: true and no second charge", async () => {
      const before = await balance()
      const key = `own-${name}-${Date.now()}`
      const call = () =>
        fetch(`${host.origin}/v1/summarize`, json({ text: "once only" }, { ...bearer(host.inferenceKey), "idempotency-key": key }))
      const first = await call()
      const firstBody = await first.text()
      const second = await call()
      expect(second.status).toBe(200)
      expect(await second.text()).toBe(firstBody)
      expect(second.headers.get("idempotent-replayed")).toBe("true")
      expect(await balance()).toBe(before - 2_000_000)
    })

    it("POST /v1/generate streams max_tokens tokens and charges 0.00001 USD for each", async () => {
      const before = await balance()
      const response = await fetch(
        `${host.origin}/v1/generate`,
        json({ prompt: "one two three", max_tokens: 12 }, bearer(host.inferenceKey))
      )
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toMatch(/^text\/plain/)
      const text = await response.text()
      expect(text.trim().split(" ")).toHaveLength(12)
      expect(await balance()).toBe(before - 12 * TOKEN_NANO)
      const entry = await usage(response.headers.get("x-request-id")!)
      expect(entry).toMatchObject({ sku: "generate", unit: 12, amount: 0.00012, inferenceDetails: { completionTokens: 12 } })
    })

    it("a client that disconnects mid-stream is charged for the tokens sent, to the nano-USD, and never the quote", async () => {
      const before = await balance()
      const controller = new AbortController()
      const response = await fetch(`${host.origin}/v1/generate`, {
        ...json({ prompt: "a b c d", max_tokens: 2000 }, bearer(host.inferenceKey)),
        signal: controller.signal
      })
      const reader = response.body!.getReader()
      let received = ""
      while (received.split(" ").length <= 5) {
        const { value } = await reader.read()
        received += new TextDecoder().decode(value)
      }
      controller.abort()
      const after = await balance()
      const entry = await usage(response.headers.get("x-request-id")!)
      expect(entry?.sku).toBe("generate")
      const sent = entry!.unit
      expect(sent).toBeGreaterThanOrEqual(received.trim().split(" ").length)
      expect(sent).toBeLessThan(2000)
      expect(before - after).toBe(sent * TOKEN_NANO)
      expect(nano(entry!.amount)).toBe(sent * TOKEN_NANO)
    })

    it.runIf(name === "express")(
      "summaries have their own limit from configuration: the call past SUMMARIZE_RPM is a 429 and charges nothing",
      async () => {
        const before = await balance()
        const call = () => fetch(`${host.origin}/v1/summarize`, json({ text: "again" }, bearer(host.inferenceKey)))
        const first = await call()
        const remaining = Number(first.headers.get("x-ratelimit-remaining-requests"))
        for (let i = 0; i < remaining; i++) expect((await call()).status).toBe(200)
        const refused = await call()
        expect(refused.status).toBe(429)
        expect(await refused.json()).toMatchObject({ error: expect.any(String) })
        expect(await balance()).toBe(before - (remaining + 1) * 2_000_000)
        // The built-in text limits are apart: generate still answers.
        const generated = await fetch(`${host.origin}/v1/generate`, json({ prompt: "still", max_tokens: 2 }, bearer(host.inferenceKey)))
        expect(generated.status).toBe(200)
        expect(generated.headers.get("x-ratelimit-limit-requests")).toBe("50")
        await generated.text()
      }
    )

    it("the request log names the endpoint's route, so do the metrics where the host serves /metrics, and the OpenAPI document lists it with its Idempotency-Key", async () => {
      const response = await fetch(`${host.origin}/v1/summarize`, json({ text: "logged" }, bearer(host.inferenceKey)))
      const requestId = response.headers.get("x-request-id")!
      // On Express the summaries' own limit was spent by the test before: then this is its 429.
      const status = response.status
      await response.text()
      while (!host.output().includes(requestId)) await new Promise((resolve) => setTimeout(resolve, 20))
      const line = host.output().split("\n").find((candidate) => candidate.includes(requestId))!
      expect(JSON.parse(line)).toMatchObject({ message: "request", annotations: { method: "POST", route: "/v1/summarize", status } })
      const metrics = await fetch(`${host.origin}/metrics`)
      expect(await metrics.text()).toMatch(/tollgate_http_requests_total\{[^}]*route="\/v1\/summarize"[^}]*\} \d+/u)
      const openapi = await (await fetch(`${host.origin}/api/v1/openapi.json`)).json() as {
        paths: Record<string, { post?: { parameters?: ReadonlyArray<{ name: string }>; responses: Record<string, unknown> } }>
      }
      expect(openapi.paths["/v1/summarize"]?.post?.parameters?.map((parameter) => parameter.name)).toContain("Idempotency-Key")
      expect(Object.keys(openapi.paths["/v1/generate"]?.post?.responses ?? {})).toContain("402")
    })
  }
)
