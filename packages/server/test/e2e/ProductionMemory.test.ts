import { Models } from "@tollgate/core"
import { ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../../http/test/support/SiwxHeader.ts"

// Production on the memory store: the accounts live inside the server process, so no key can be
// minted from outside (see ShippedServer). These tests cover what needs none: public endpoints,
// the answers to missing or forged credentials, and wallets signing in.
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  server = await ShippedServer.start({
    signingKey: true,
    config: {
      models: Models.defaults.filter((model) => model.id === "local-renderer"),
      x402: { payTo: { evm: "0x1111111111111111111111111111111111111111" }, facilitatorUrl: "http://127.0.0.1:9" },
      // Never reached: an unpaid call is answered 402 before anything is forwarded.
      rpc: { upstreams: { "base-mainnet": ["http://127.0.0.1:9"] } }
    }
  })
})

afterAll(() => server?.stop())

const forged = "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhY2N0X3gifQ.c2lnbmF0dXJl"

const image = (headers: Record<string, string>) =>
  fetch(`${server.api}/image/generate`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 64, height: 64, format: "png" })
  })

describe("Production mode on memory: public endpoints answer, credentials are required everywhere else", () => {
  it("GET /crypto/rpc/networks and GET /models need no key", async () => {
    expect((await fetch(`${server.api}/crypto/rpc/networks`)).status).toBe(200)
    const models = await fetch(`${server.api}/models`)
    expect(models.status).toBe(200)
    expect((await models.json() as { data: Array<{ id: string }> }).data.map((model) => model.id)).toEqual(["local-renderer"])
  })

  const textFile = () => {
    const form = new FormData()
    form.append("file", new Blob(["hello"]), "hello.txt")
    return form
  }
  it.each(
    [
      ["/image/generate", () => JSON.stringify({ model: "local-renderer", prompt: "a lighthouse", width: 64, height: 64 })],
      ["/augment/text-parser", textFile],
      ["/crypto/rpc/base-mainnet", () => JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" })]
    ] as const
  )("POST %s with no credentials answers 402 with the payment options and the wallet challenge", async (path, body) => {
    const payload = body()
    const headers: Record<string, string> = typeof payload === "string" ? { "content-type": "application/json" } : {}
    const response = await fetch(`${server.api}${path}`, { method: "POST", headers, body: payload })
    expect(response.status).toBe(402)
    const answer = await response.json() as { accepts: Array<{ payTo: string }>; extensions: Record<string, unknown> }
    expect(answer.accepts[0]!.payTo).toBe("0x1111111111111111111111111111111111111111")
    expect(answer.extensions).toHaveProperty("sign-in-with-x")
  })

  it.each([
    "/api_keys",
    "/api_keys/rate_limits",
    "/api_keys/rate_limit_logs",
    "/billing/usage",
    "/billing/usage-history"
  ])("GET %s with a forged key answers 401 StandardError", async (path) => {
    const response = await fetch(`${server.api}${path}`, { headers: { authorization: `Bearer ${forged}` } })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({ error: expect.any(String) })
  })

  it("POST /x402/top-up without a payment answers 402 for the $5 minimum in USDC on Base; GET /x402/balance answers 0 for a new wallet", async () => {
    const topUp = await fetch(`${server.api}/x402/top-up`, { method: "POST" })
    expect(topUp.status).toBe(402)
    const required = await topUp.json() as { x402Version: number; resource: { url: string; description: string }; accepts: Array<unknown> }
    expect(required.x402Version).toBe(2)
    expect(required.resource).toMatchObject({
      url: expect.stringMatching(/\/api\/v1\/x402\/top-up$/),
      description: "Top up 5 USD of wallet credit"
    })
    expect(required.accepts).toEqual([{
      scheme: "exact",
      network: "eip155:8453",
      asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      amount: "5000000",
      payTo: "0x1111111111111111111111111111111111111111",
      maxTimeoutSeconds: 300,
      extra: { name: "USD Coin", version: "2" }
    }])
    const balance = await fetch(`${server.api}/x402/balance/0x000000000000000000000000000000000000dEaD`)
    expect(balance.status).toBe(200)
    expect(await balance.json()).toMatchObject({ balanceUsd: "0" })
  })

  it("a wallet signed in with SIGN-IN-WITH-X (viem's SIWE message) and no credit gets the authenticated-wallet 402", async () => {
    const { header } = await SiwxHeader.freshWallet(`http://localhost:${server.port}`)
    const response = await image({ "sign-in-with-x": header })
    expect(response.status).toBe(402)
    expect(await response.json()).toMatchObject({ code: "PAYMENT_REQUIRED", reason: "insufficient_balance" })
  })
})
