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
