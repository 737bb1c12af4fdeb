import { RedisCluster, RedisServer } from "@tollgate/testkit"
import * as AdmissionContract from "@tollgate/testkit/contracts/Admission"
import { Layer } from "effect"
import { afterAll } from "vitest"
import * as AdmissionStoreRedis from "../src/AdmissionStoreRedis.ts"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as IdempotencyStoreRedis from "../src/IdempotencyStoreRedis.ts"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const onRedis = (target: RedisConnection.Target, options: AdmissionStoreRedis.Options = {}) =>
  Layer.mergeAll(
    AdmissionStoreRedis.layerRedis(options),
    RateLimiterRedis.layerRedis(),
    CreditLedgerRedis.layerRedis(),
    IdempotencyStoreRedis.layerRedis
  ).pipe(Layer.provide(RedisConnection.layer(target)))

AdmissionContract.run([
  RedisServer.backend(redis, (url) => onRedis({ url })),
  // The fallback where Redis refuses Functions: the same script as EVALSHA.
  { name: "redis, EVALSHA", layer: onRedis({ url: redis.url, functions: false }) },
  RedisCluster.backend(cluster, (seeds) => onRedis({ cluster: seeds })),
  // The server's default: admissions and settlements grouped per account.
  { name: "redis, grouped", layer: onRedis({ url: redis.url }, { admissionGroupMs: 1, settlementGroupMs: 2 }) },
  { name: "redis cluster, grouped", layer: onRedis({ cluster: cluster.seeds.split(",") }, { admissionGroupMs: 1, settlementGroupMs: 2 }) }
])
