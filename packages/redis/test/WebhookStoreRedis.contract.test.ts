import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as WebhookStoreContract from "@tollgate/testkit/contracts/WebhookStore"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as WebhookStoreRedis from "../src/WebhookStoreRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const onRedis = (target: RedisConnection.Target) => WebhookStoreRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer(target)))

WebhookStoreContract.run([
  RedisServer.backend(redis, (url) => onRedis({ url })),
  RedisCluster.backend(cluster, (seeds) => onRedis({ cluster: seeds }))
])
