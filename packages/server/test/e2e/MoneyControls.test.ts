import { Models } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as SiwxHeader from "../../../http/test/support/SiwxHeader.ts"

const redis = await RedisServer.start()
let memory: ShippedServer.ShippedServer
let onRedis: ShippedServer.ShippedServer

beforeAll(async () => {
  ;[memory, onRedis] = await Promise.all([
    ShippedServer.start(),
    ShippedServer.start({
      store: "redis",
      redisUrl: redis.url,
      signingKey: true,
      env: { TOLLGATE_OPERATOR_ACCOUNTS: "acct_e2e" },
      config: { models: Models.defaults.filter((model) => model.id === "local-renderer") }
    })
  ])
}, 120_000)

afterAll(async () => {
  await memory?.stop()
  await onRedis?.stop()
  await redis.stop()
})

const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

const parse = (server: ShippedServer.ShippedServer, key: string) => {
  const form = new FormData()
  form.append("file", new Blob(["Hello from a text file.\n"], { type: "text/plain" }), "hello.txt")
  return fetch(`${server.api}/augment/text-parser`, { method: "POST", headers: bearer(key), body: form })
}

const balanceOf = async (server: ShippedServer.ShippedServer) => {
  const response = await fetch(`${server.api}/billing/balance`, { headers: bearer(server.credentials!.adminKey) })
  return (await response.json() as { balances: { usd: number } }).balances.usd
}

describe.each([["dev mode on memory", () => memory], ["production on Redis", () => onRedis]])(
  "A key capped at 0.05 USD a day (%s): of 10 concurrent 0.01 USD calls exactly 5 pass; the 5 refused are charged nothing",
  (_, server) => {
    it("POST /api_keys caps the key; the calls past the cap are 402 SPEND_CAP_REACHED; usage and GET /api_keys/{id} show 0.05 USD", async () => {
      const { adminKey } = server().credentials!
      const created = await fetch(`${server().api}/api_keys`, {
        method: "POST",
        headers: { ...bearer(adminKey), "content-type": "application/json" },
        body: JSON.stringify({ apiKeyType: "INFERENCE", description: "capped", consumptionLimit: { usd: 0.05 }, limitPeriod: "EPOCH" })
      })
      expect(created.status).toBe(201)
      const { apiKey, id } = await created.json() as { apiKey: string; id: string }
      const before = await balanceOf(server())

      const responses = await Promise.all(Array.from({ length: 10 }, () => parse(server(), apiKey)))
      const statuses = responses.map((response) => response.status).sort()
      expect(statuses).toEqual([200, 200, 200, 200, 200, 402, 402, 402, 402, 402])
      const refused = responses.filter((response) => response.status === 402)
      for (const response of refused) {
        expect(await response.json()).toEqual({ error: expect.stringContaining("0.05 USD per UTC day"), code: "SPEND_CAP_REACHED" })
      }

      const history = await fetch(`${server().api}/billing/usage-history?limit=500`, { headers: bearer(adminKey) })
      const { data } = await history.json() as { data: Array<{ sku: string; amount: number; inferenceDetails: { requestId: string } }> }
      const charged = data.filter((entry) => entry.sku === "text-parser")
      expect(charged).toHaveLength(5)
      expect(charged.reduce((sum, entry) => sum + Math.round(entry.amount * 1e9), 0)).toBe(50_000_000)
      expect(Math.round((before - await balanceOf(server())) * 1e9)).toBe(50_000_000)

      const shown = await fetch(`${server().api}/api_keys/${id}`, { headers: bearer(adminKey) })
      expect(await shown.json()).toMatchObject({
        data: { id, consumptionLimits: { usd: 0.05 }, limitPeriod: "EPOCH", currentPeriodUsage: { usd: "0.05" } }
      })
    })
  }
)

describe.each([["dev mode on memory", () => memory], ["production on Redis", () => onRedis]])(
  "GET /billing/usage-analytics (%s) adds up the entries usage-history lists for the same range, to the nano-USD",
  (_, server) => {
    const nanoOf = (usd: number) => Math.round(usd * 1e9)

    it("the day's totals, by day, sku and key, equal the sum of the day's usage-history amounts", async () => {
      const { adminKey, inferenceKey } = server().credentials!
      await Promise.all(Array.from({ length: 3 }, () => parse(server(), inferenceKey)))
      const today = new Date().toISOString().slice(0, 10)
      const analytics = await fetch(`${server().api}/billing/usage-analytics?startDate=${today}&endDate=${today}`, {
        headers: bearer(adminKey)
      })
      expect(analytics.status).toBe(200)
      const report = await analytics.json() as {
        lookback: string
        byDate: Array<{ date: string; USD: number; DIEM: number }>
        bySku: Array<{ sku: string; totalUsd: number; totalDiem: number }>
        byKey: Array<{ apiKeyId: string | null; description: string; totalUsd: number; totalDiem: number }>
      }
      const history = await fetch(`${server().api}/billing/usage-history?limit=500&startDate=${today}&endDate=${today}T23:59:59.999Z`, {
        headers: bearer(adminKey)
      })
      const { data } = await history.json() as { data: Array<{ sku: string; amount: number }> }
      const historyTotal = data.reduce((sum, entry) => sum + nanoOf(entry.amount), 0)
      expect(historyTotal).toBeGreaterThan(0)
      expect(report.lookback).toBe(`${today}:${today}`)
      expect(report.byDate.map((day) => day.date)).toEqual([today])
      expect(report.byDate.reduce((sum, day) => sum + nanoOf(day.USD) + nanoOf(day.DIEM), 0)).toBe(historyTotal)
      expect(report.bySku.reduce((sum, sku) => sum + nanoOf(sku.totalUsd) + nanoOf(sku.totalDiem), 0)).toBe(historyTotal)
      expect(report.byKey.reduce((sum, key) => sum + nanoOf(key.totalUsd) + nanoOf(key.totalDiem), 0)).toBe(historyTotal)
      const textParser = data.filter((entry) => entry.sku === "text-parser").reduce((sum, entry) => sum + nanoOf(entry.amount), 0)
      expect(nanoOf(report.bySku.find((sku) => sku.sku === "text-parser")!.totalUsd)).toBe(textParser)
      expect(report.byKey.map((key) => key.description)).toContain("capped")
    })

    it("a bad lookback, or a startDate without an endDate, is a 400 naming the field", async () => {
      const { adminKey } = server().credentials!
      const lookback = await fetch(`${server().api}/billing/usage-analytics?lookback=91d`, { headers: bearer(adminKey) })
      expect(lookback.status).toBe(400)
      expect(await lookback.json()).toMatchObject({ details: { lookback: { _errors: [expect.any(String)] } } })
      const half = await fetch(`${server().api}/billing/usage-analytics?startDate=2026-01-01`, { headers: bearer(adminKey) })
      expect(half.status).toBe(400)
      expect(await half.json()).toMatchObject({ details: { endDate: { _errors: [expect.any(String)] } } })
    })
  }
)

/** A SIGN-IN-WITH-X header of `account` for the server (each is good for one request). */
const signIn = (server: ShippedServer.ShippedServer, account: PrivateKeyAccount) =>
  SiwxHeader.of(`http://localhost:${server.port}`, account)

describe.each([["dev mode on memory", () => memory], ["production on Redis", () => onRedis]])(
  "GET /x402/transactions/{wallet} (%s): the wallet's grants and charges, newest first, paged by cursor, offset or page, for the wallet itself or an operator",
  (_, server) => {
    it("a wallet sees its own; an operator's ADMIN key any; another wallet or an INFERENCE key is a 403", async () => {
      const { adminKey, inferenceKey } = server().credentials!
      const wallet = privateKeyToAccount(generatePrivateKey())
      const granted = await fetch(`${server().api}/billing/credits`, {
        method: "POST",
        headers: { ...bearer(adminKey), "content-type": "application/json" },
        body: JSON.stringify({
          accountId: `wallet:evm:${wallet.address.toLowerCase()}`,
          amountUsd: "1",
          reference: `wallet-${wallet.address}`
        })
      })
      expect(granted.status).toBe(200)
      for (let i = 0; i < 2; i++) {
        const form = new FormData()
        form.append("file", new Blob(["Hello.\n"], { type: "text/plain" }), "hello.txt")
        const paid = await fetch(`${server().api}/augment/text-parser`, {
          method: "POST",
          headers: { "sign-in-with-x": await signIn(server(), wallet) },
          body: form
        })
        expect(paid.status).toBe(200)
      }
      const read = async (headers: Record<string, string>, query = "") =>
        fetch(`${server().api}/x402/transactions/${wallet.address}${query}`, { headers })
      type Page = {
        success: boolean
        data: {
          walletAddress: string
          currentBalance: number
          transactions: Array<Record<string, unknown>>
          pagination: { limit: number; offset: number; hasMore: boolean; nextCursor: string | null }
        }
      }
      const first = await read({ "sign-in-with-x": await signIn(server(), wallet) }, "?limit=2")
      expect(first.status).toBe(200)
      const page = await first.json() as Page
      expect(page).toMatchObject({
        success: true,
        data: { walletAddress: wallet.address, currentBalance: 0.98, pagination: { limit: 2, hasMore: true } }
      })
      expect(page.data.transactions).toEqual([
        expect.objectContaining({
          type: "CHARGE",
          amount: -0.01,
          balanceAfter: 0.98,
          requestId: expect.any(String),
          modelId: "text-parser"
        }),
        expect.objectContaining({
          type: "CHARGE",
          amount: -0.01,
          balanceAfter: 0.99,
          requestId: expect.any(String),
          modelId: "text-parser"
        })
      ])
      const next = await read(bearer(adminKey), `?limit=2&cursor=${page.data.pagination.nextCursor}`)
      expect(next.status).toBe(200)
      const rest = await next.json() as Page
      expect(rest.data.transactions).toEqual([
        expect.objectContaining({ type: "GRANT", amount: 1, balanceAfter: 1, requestId: null, transactionHash: null })
      ])
      expect(rest.data.pagination).toEqual({ limit: 2, offset: 2, hasMore: false, nextCursor: null })

      // The reference's offset, and the spec's 1-based page with its x-pagination-* headers, page the same list.
      const byOffset = await read(bearer(adminKey), "?limit=2&offset=1")
      expect(byOffset.status).toBe(200)
      const offsetPage = await byOffset.json() as Page
      expect(offsetPage.data.transactions.map((entry) => [entry["type"], entry["balanceAfter"]])).toEqual([["CHARGE", 0.99], ["GRANT", 1]])
      expect(offsetPage.data.pagination).toEqual({ limit: 2, offset: 1, hasMore: false, nextCursor: null })
      const byPage = await read(bearer(adminKey), "?limit=2&page=2")
      expect(byPage.status).toBe(200)
      expect((await byPage.json() as Page).data.transactions).toEqual(rest.data.transactions)
      expect(Object.fromEntries([...byPage.headers].filter(([name]) => name.startsWith("x-pagination-")))).toEqual({
        "x-pagination-limit": "2",
        "x-pagination-page": "2",
        "x-pagination-total": "3",
        "x-pagination-total-pages": "2"
      })
      const both = await read(bearer(adminKey), `?limit=2&offset=2&cursor=${page.data.pagination.nextCursor}`)
      expect(both.status).toBe(400)
      expect(await both.json()).toEqual({
        error: "Invalid request parameters: offset: give one of cursor, offset and page",
        details: { _errors: [], offset: { _errors: ["give one of cursor, offset and page"] } }
      })
      expect((await read(bearer(adminKey), "?offset=-1")).status).toBe(400)

      expect((await read({ "sign-in-with-x": await signIn(server(), privateKeyToAccount(generatePrivateKey())) })).status).toBe(403)
      expect((await read(bearer(inferenceKey))).status).toBe(403)
      expect((await read({})).status).toBe(401)
      const bad = await fetch(`${server().api}/x402/transactions/0x1234`, { headers: bearer(adminKey) })
      expect(bad.status).toBe(400)
      expect(await bad.json()).toMatchObject({ details: { walletAddress: { _errors: [expect.any(String)] } } })
    })
  }
)
