/**
 * Holds after a store outage, through the shipped server: Redis is killed while paid calls are in
 * flight (their settlements and releases fail), then restarted from its append-only file, which
 * still has their holds. Within the hold expiry the background sweep closes every one of them,
 * without any further call on the account, and the gauges, read from the ledger, say so.
 */
import { FakeChatUpstream, RedisServer, ShippedServer } from "@tollgate/testkit"
import { createClient } from "redis"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const HOLD_TTL_SECONDS = 5

let redis: RedisServer.RedisServer
let upstream: FakeChatUpstream.FakeChatUpstream
let server: ShippedServer.ShippedServer

beforeAll(async () => {
  redis = await RedisServer.start({ appendOnly: true })
  upstream = await FakeChatUpstream.start(() => ({ pieces: ["slow", " answer"], delayMs: 5_000 }))
  server = await ShippedServer.start({
    store: "redis",
    redisUrl: redis.url,
    signingKey: true,
    env: { TOLLGATE_HOLD_TTL_SECONDS: String(HOLD_TTL_SECONDS), TOLLGATE_METRICS: "open" },
    config: {
      models: [{ id: "slow-model", type: "text", upstreams: [{ baseUrl: upstream.baseUrl }] }],
      prices: { chat: { "slow-model": { inputPerMillionUsd: "0.5", outputPerMillionUsd: "1.5" } } }
    }
  })
}, 180_000)

afterAll(async () => {
  await server?.stop()
  await upstream?.close()
  await redis?.stop()
})

const gauge = async (name: string) => {
  const text = await (await fetch(`${server.origin}/metrics`)).text()
  const line = text.split("\n").find((row) => row.startsWith(`${name} `) || row.startsWith(`${name}{`))
  return line === undefined ? undefined : Number(line.split(" ").at(-1))
}

/** The account's open holds, held nano-USD and USD balance in nano-USD, read from Redis itself. */
const ledgerOf = async (accountId: string) => {
  const client = createClient({ url: redis.url })
  await client.connect()
  try {
    const [open, held, usd] = await client.hmGet(`tg:cl:{${accountId}}:a`, ["open", "held", "usd"])
    return { open: Number(open ?? 0), held: Number(held ?? 0), usd: Number(usd ?? 0) }
  } finally {
    await client.quit()
  }
}

describe("Holds left open by a Redis outage are closed within their expiry, and the gauges come from the ledger", () => {
  it(
    "Redis killed during 10 paid calls and restarted with its AOF: every hold is released, the $25 balance is whole again, held amount and gauge read 0",
    async () => {
      const { accountId, inferenceKey } = server.credentials!
      const calls = Array.from({ length: 10 }, () =>
        fetch(`${server.api}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${inferenceKey}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "slow-model", messages: [{ role: "user", content: "hi" }] })
        }).then(async (response) => {
          await response.arrayBuffer()
          return response.status
        }, () => 0))
      // The calls are admitted (their holds are in Redis and its AOF) and wait on the slow upstream.
      const deadline = Date.now() + 20_000
      while ((await ledgerOf(accountId)).open < 10 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect((await ledgerOf(accountId)).open).toBe(10)
      await redis.kill()
      const statuses = await Promise.all(calls)
      expect(statuses.every((status) => status !== 200)).toBe(true)
      await redis.restart()
      const restored = await ledgerOf(accountId)
      expect(restored.open).toBe(10)
      expect(restored.held).toBeGreaterThan(0)
      expect(restored.usd).toBe(25_000_000_000)

      // Nothing touches the account from here on: only the sweep can close the holds.
      const sweptBy = Date.now() + (HOLD_TTL_SECONDS + 25) * 1000
      let state = restored
      let open: number | undefined
      let held: number | undefined
      while (Date.now() < sweptBy) {
        state = await ledgerOf(accountId)
        open = await gauge("tollgate_holds_open")
        held = await gauge("tollgate_held_nano_usd")
        if (state.open === 0 && open === 0 && held === 0) break
        await new Promise((resolve) => setTimeout(resolve, 500))
      }
      // Released, not captured: none of the calls answered, so the provisioned $25 is all there.
      expect(state).toEqual({ open: 0, held: 0, usd: 25_000_000_000 })
      expect({ open, held }).toEqual({ open: 0, held: 0 })
    },
    120_000
  )
})
