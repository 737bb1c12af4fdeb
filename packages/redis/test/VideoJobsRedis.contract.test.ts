import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as VideoJobsContract from "@tollgate/testkit/contracts/VideoJobs"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as RedisConnection from "../src/RedisConnection.ts"
import * as VideoJobsRedis from "../src/VideoJobsRedis.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

VideoJobsContract.run([
  RedisServer.backend(redis, (url) => VideoJobsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(cluster, (seeds) => VideoJobsRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
])
