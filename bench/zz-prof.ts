import { NodeRedis } from "@effect/platform-node"
import { RateLimiter } from "@tollgate/core"
import { RateLimiterRedis } from "@tollgate/redis"
import { RedisServer } from "@tollgate/testkit"
import { Effect, Layer, ManagedRuntime } from "effect"
const N = 40000
const server = await RedisServer.start()
const limits = (i: number): ReadonlyArray<RateLimiter.Limit> => [{ type: "user", key: `bench:${i % 256}`, hashTag: `a${i % 256}`, requests: { limit: 1e9, windowMs: 60000 }, tokens: { limit: 1e12, windowMs: 60000, reserve: 100 } }]
const idx = Array.from({ length: N }, (_, i) => i)
const rt = ManagedRuntime.make(RateLimiterRedis.layerRedis().pipe(Layer.provide(NodeRedis.layer({ url: server.url })), Layer.orDie))
const limiter = await rt.runPromise(Effect.service(RateLimiter.RateLimiter))
for (let r = 0; r < 5; r++) {
  const s = performance.now()
  await rt.runPromise(Effect.forEach(idx, (i) => limiter.admit(limits(i)), { concurrency: 64, discard: true }))
  console.log("admit", Math.round(N / ((performance.now() - s) / 1000)))
}
await server.stop()
process.exit(0)
