import { assert } from "@effect/vitest"
import { Generations, Money } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import { Effect, Layer, Option } from "effect"
import { afterAll } from "vitest"
import * as GenerationsRedis from "../src/GenerationsRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

let counter = 0
const generation = (overrides: Partial<Generations.Generation> = {}): Generations.Generation => ({
  id: `gen-${Date.now()}-${counter++}`,
  accountId: "acct_generations",
  model: "llama-3.3-70b",
  upstream: "gpu-1:8000",
  promptTokens: 12,
  completionTokens: 5,
  cachedTokens: 4,
  cost: Money.unsafeNano(12_345),
  latencyMs: 87,
  cutShort: false,
  createdAt: Date.now(),
  ...overrides
})

Contract.contract(
  "Generations contract: a call's record is read back by its own account only",
  [
    { name: "memory", layer: Generations.layerMemory },
    RedisServer.backend(redis, (url) => GenerationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
    RedisCluster.backend(cluster, (seeds) => GenerationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
  ],
  (it) => {
    it.effect("a recorded call reads back as it was under its account, and as unknown under another", () =>
      Effect.gen(function*() {
        const generations = yield* Generations.Generations
        const recorded = generation({ cutShort: true })
        yield* generations.record(recorded)
        assert.deepStrictEqual(yield* generations.get(recorded.accountId, recorded.id), Option.some(recorded))
        assert.deepStrictEqual(yield* generations.get("acct_other", recorded.id), Option.none())
        assert.deepStrictEqual(yield* generations.get(recorded.accountId, "gen-unknown"), Option.none())
      }))
  }
)
