import { NodeRedis } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Redis } from "effect/persistence"
import { afterAll } from "vitest"
import { Anvil, Contract, RedisServer } from "../src/index.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

Contract.contract(
  "Contract: one suite runs against every backend",
  [RedisServer.backend(redis, (url) => NodeRedis.layer({ url }))],
  (it) => {
    it.effect("a throwaway redis-server answers commands", () =>
      Effect.gen(function*() {
        const client = yield* Redis.Redis
        yield* client.send("SET", "k", "v")
        assert.strictEqual(yield* client.send<string>("GET", "k"), "v")
      }))
  }
)

describe("Anvil: a throwaway EVM node from npm", () => {
  it("starts on a free port with the chain id asked for", async () => {
    const anvil = await Anvil.start({ chainId: 8453 })
    try {
      const response = await fetch(anvil.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" })
      })
      assert.deepStrictEqual(await response.json(), { jsonrpc: "2.0", id: 1, result: "0x2105" })
    } finally {
      await anvil.stop()
    }
  })
})
