import { assert } from "@effect/vitest"
import { AbuseGuard, AuthStore, CreditLedger, Principal } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import * as AdmissionContract from "@tollgate/testkit/contracts/Admission"
import { Effect, Layer } from "effect"
import { afterAll } from "vitest"
import * as AbuseGuardRedis from "../src/AbuseGuardRedis.ts"
import * as AdmissionStoreRedis from "../src/AdmissionStoreRedis.ts"
import * as AuthStoreRedis from "../src/AuthStoreRedis.ts"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as IdempotencyStoreRedis from "../src/IdempotencyStoreRedis.ts"
import * as RateLimiterRedis from "../src/RateLimiterRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const { account, admit, journalKinds, refusal, used } = AdmissionContract

const onRedis = (target: RedisConnection.Target, options: AdmissionStoreRedis.Options = {}) =>
  Layer.mergeAll(
    AdmissionStoreRedis.layerRedis(options),
    AuthStoreRedis.layerRedis,
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

Contract.contract(
  "An admission store that reads the abuse guard's blocks refuses a blocked key right after its standing, and writes nothing",
  [
    RedisServer.backend(redis, (url) => Layer.merge(onRedis({ url }), AbuseGuardRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ url }))))),
    RedisCluster.backend(cluster, (seeds) =>
      Layer.merge(onRedis({ cluster: seeds }), AbuseGuardRedis.layerRedis.pipe(Layer.provide(RedisConnection.layer({ cluster: seeds })))))
  ],
  (it) => {
    const blockKeyOf = (accountId: string, keyId: string) =>
      Effect.map(AbuseGuard.AbuseGuard, (guard) =>
        guard.blockKey!(AbuseGuard.principalCaller(new Principal.ApiKeyPrincipal({ accountId, keyId, keyType: "INFERENCE", tier: "default" }))))

    const block = (accountId: string, keyId: string) =>
      Effect.gen(function*() {
        const guard = yield* AbuseGuard.AbuseGuard
        const caller = AbuseGuard.principalCaller(new Principal.ApiKeyPrincipal({ accountId, keyId, keyType: "INFERENCE", tier: "default" }))
        for (let i = 0; i <= AbuseGuard.maxFailures; i++) yield* guard.recordFailure(caller)
        assert.isAbove(yield* guard.blockedFor(caller), 0)
      })

    it.effect("a blocked key is refused with the block's time left; its account's other key is admitted", () =>
      Effect.gen(function*() {
        const accountId = yield* account(10_000)
        const store = yield* AuthStore.AuthStore
        yield* store.putKey({ id: "key_2", accountId, type: "INFERENCE", tier: "default", description: "contract", createdAt: new Date(0) })
        yield* block(accountId, "key_1")
        const { reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10, abuseBlockKey: yield* blockKeyOf(accountId, "key_1") })
        assert.strictEqual(reply._tag, "Blocked")
        assert.isAbove(reply._tag === "Blocked" ? reply.ms : 0, 0)
        const ledger = yield* CreditLedger.CreditLedger
        assert.strictEqual((yield* ledger.balance(accountId)).heldUsd, 0)
        assert.strictEqual(yield* used(accountId), 0)
        assert.deepStrictEqual(yield* journalKinds(accountId), ["grant"])
        const other = yield* admit(accountId, { reference: "r2", amount: 625, requests: 10, keyId: "key_2", abuseBlockKey: yield* blockKeyOf(accountId, "key_2") })
        assert.strictEqual(other.reply._tag, "Admitted")
      }))

    it.effect("a revoked key that is also blocked is refused for its standing, which comes first", () =>
      Effect.gen(function*() {
        const accountId = yield* account(10_000)
        yield* block(accountId, "key_1")
        const store = yield* AuthStore.AuthStore
        yield* store.revokeKey(accountId, "key_1", new Date(0))
        const { reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10, abuseBlockKey: yield* blockKeyOf(accountId, "key_1") })
        assert.deepStrictEqual(refusal(reply), { _tag: "KeyRefused", accountExists: true, revoked: true })
      }))
  }
)
