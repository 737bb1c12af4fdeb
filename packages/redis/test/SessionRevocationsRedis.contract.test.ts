import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as SessionRevocationsContract from "@tollgate/testkit/contracts/SessionRevocations"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as SessionRevocationsRedis from "../src/SessionRevocationsRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

SessionRevocationsContract.run([
  RedisServer.backend(redis, (url) => SessionRevocationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(
    cluster,
    (seeds) => SessionRevocationsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds })))
  )
])
