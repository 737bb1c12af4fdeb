import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as AuditLogContract from "@tollgate/testkit/contracts/AuditLog"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as AuditLogRedis from "../src/AuditLogRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const redisLayer = (target: RedisConnection.Target) =>
  AuditLogRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer(target).pipe(Layer.orDie)))

AuditLogContract.run([
  RedisServer.backend(redis, (url) => redisLayer({ url })),
  RedisCluster.backend(cluster, (seeds) => redisLayer({ cluster: seeds }))
])
