import { RedisServer } from "@tollgate/testkit"
import * as WebhooksContract from "@tollgate/testkit/contracts/Webhooks"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as WebhookStoreRedis from "../src/WebhookStoreRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

WebhooksContract.run([
  RedisServer.backend(
    redis,
    (url) => WebhooksContract.observed(WebhookStoreRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })), Layer.orDie))
  )
])
