import { Models } from "@tollgate/core"
import { RedisServer, ShippedServer } from "@tollgate/testkit"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

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
      const analytics = await fetch(`${server().api}/billing/usage-analytics?startDate=${today}&endDate=${today}`, { headers: bearer(adminKey) })
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
