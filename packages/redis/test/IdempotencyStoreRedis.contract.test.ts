import { IdempotencyStore } from "@tollgate/core"
import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as IdempotencyStoreContract from "@tollgate/testkit/contracts/IdempotencyStore"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as IdempotencyStoreRedis from "../src/IdempotencyStoreRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const Store = IdempotencyStore.IdempotencyStore
const LEASE_MS = IdempotencyStoreContract.LEASE_MS

IdempotencyStoreContract.run([
  RedisServer.backend(redis, (url) => IdempotencyStoreRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(cluster, (seeds) => IdempotencyStoreRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
])

IdempotencyStoreContract.runLease([
  RedisServer.backend(
    redis,
    (url) => Layer.effect(Store, IdempotencyStoreRedis.make({ leaseMs: LEASE_MS })).pipe(Layer.provide(RedisConnection.layer({ url })))
  ),
  RedisCluster.backend(
    cluster,
    (seeds) =>
      Layer.effect(Store, IdempotencyStoreRedis.make({ leaseMs: LEASE_MS })).pipe(Layer.provide(RedisConnection.layer({ cluster: seeds })))
  )
])
