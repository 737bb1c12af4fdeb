import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as GenerationsContract from "@tollgate/testkit/contracts/Generations"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as GenerationsRedis from "../src/GenerationsRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

GenerationsContract.run([
  RedisServer.backend(redis, (url) => GenerationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(cluster, (seeds) => GenerationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
])
