import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as RateLimiterContract from "@tollgate/testkit/contracts/RateLimiter"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RateLimitLogRedis from "../src/RateLimitLogRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

RateLimiterContract.run([
  RedisServer.backend(redis, (url) =>
    RateLimiterRedis.layerRedis().pipe(
      Layer.provideMerge(RateLimitLogRedis.layerRedis()),
      Layer.provide(RedisConnection.layer({ url }))
    )),
  RedisCluster.backend(cluster, (seeds) =>
    RateLimiterRedis.layerRedis().pipe(
      Layer.provideMerge(RateLimitLogRedis.layerRedis()),
      Layer.provide(RedisConnection.layer({ cluster: seeds }))
    )),
  {
    ...RedisServer.backend(redis, (url) =>
      RateLimiterRedis.layerRedis({ batch: false }).pipe(
        Layer.provideMerge(RateLimitLogRedis.layerRedis()),
        Layer.provide(RedisConnection.layer({ url }))
      )),
    name: "redis, one call per admission"
  }
])
