import { assert } from "@effect/vitest"
import { CreditLedger } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import * as KeyCapsContract from "@tollgate/testkit/contracts/KeyCaps"
import { Effect, Layer } from "effect"
import { afterAll } from "vitest"
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

const { admit, capped, giveBack, heldUsd, settle, spent } = KeyCapsContract

const onRedis = (target: RedisConnection.Target) =>
  Layer.mergeAll(
    AdmissionStoreRedis.layerRedis(),
    AuthStoreRedis.layerRedis,
    RateLimiterRedis.layerRedis(),
    CreditLedgerRedis.layerRedis(),
    IdempotencyStoreRedis.layerRedis
  ).pipe(Layer.provide(RedisConnection.layer(target)))

KeyCapsContract.run([
  RedisServer.backend(redis, (url) => onRedis({ url })),
  RedisCluster.backend(cluster, (seeds) => onRedis({ cluster: seeds }))
])

/**
 * Rewrites a hold's record as the release before this one wrote it: the same JSON fields, in
 * cjson's order rather than this release's, and `nc` as given.
 */
const asPreviousRelease = (accountId: string, reference: string, nc: boolean) =>
  Effect.gen(function*() {
    const { sendCommand } = yield* RedisConnection.RedisConnection
    const holds = CreditLedgerRedis.accountKeys(CreditLedgerRedis.defaultPrefix, accountId)[1]
    const raw = String(yield* Effect.promise(() => sendCommand(["HGET", holds, reference], holds)))
    const { a, d, fa, fu, s, v, x } = JSON.parse(raw) as Record<string, string>
    const previous = JSON.stringify({ v, x, d, fu, fa, a, s, ...(nc ? { nc: "1" } : {}) })
    assert.notStrictEqual(previous.slice(0, 16), raw.slice(0, 16))
    yield* Effect.promise(() => sendCommand(["HSET", holds, reference, previous], holds))
  })

Contract.contract(
  "A hold record the previous release wrote (JSON in another order, with or without nc) is settled and given back as this release's own: nc alone leaves the cap unread",
  [
    RedisServer.backend(redis, (url) => onRedis({ url }).pipe(Layer.provideMerge(RedisConnection.layer({ url })))),
    RedisCluster.backend(
      cluster,
      (seeds) => onRedis({ cluster: seeds }).pipe(Layer.provideMerge(RedisConnection.layer({ cluster: seeds })))
    )
  ],
  (it) => {
    it.effect("a capture takes the amount from the balance and counts it in the cap in place of the quote; repeated, it answers the same", () =>
      Effect.gen(function*() {
        const accountId = yield* capped(1_000, "MONTH")
        assert.strictEqual((yield* admit(accountId, "r1", 600))._tag, "Admitted")
        yield* asPreviousRelease(accountId, "r1", false)
        const first = yield* settle(accountId, "r1", 200)
        assert.deepStrictEqual([first.fromUsd, first.fromAllowance, first.balance.usd, first.balance.heldUsd], [
          200,
          0,
          1_000_000_000 - 200,
          0
        ])
        assert.strictEqual(yield* spent(accountId), 200)
        const again = yield* settle(accountId, "r1", 200)
        assert.deepStrictEqual([again.fromUsd, again.balance.usd], [200, 1_000_000_000 - 200])
        assert.strictEqual(yield* spent(accountId), 200)
        // With nc, as an uncapped key's hold is written: its settlement reads no cap, so the quote stays counted.
        assert.strictEqual((yield* admit(accountId, "r2", 300))._tag, "Admitted")
        yield* asPreviousRelease(accountId, "r2", true)
        const uncapped = yield* settle(accountId, "r2", 100)
        assert.deepStrictEqual([uncapped.fromUsd, uncapped.balance.usd, uncapped.balance.heldUsd], [100, 1_000_000_000 - 300, 0])
        assert.strictEqual(yield* spent(accountId), 500)
      }))

    it.effect("a give-back releases the hold and takes its quote out of the cap; with nc it leaves the cap unread", () =>
      Effect.gen(function*() {
        const accountId = yield* capped(1_000, "MONTH")
        assert.strictEqual((yield* admit(accountId, "g1", 400))._tag, "Admitted")
        yield* asPreviousRelease(accountId, "g1", false)
        yield* giveBack(accountId, "g1")
        assert.deepStrictEqual([yield* heldUsd(accountId), yield* spent(accountId)], [0, 0])
        assert.strictEqual((yield* admit(accountId, "g2", 400))._tag, "Admitted")
        yield* asPreviousRelease(accountId, "g2", true)
        yield* giveBack(accountId, "g2")
        assert.deepStrictEqual([yield* heldUsd(accountId), yield* spent(accountId)], [0, 400])
        const ledger = yield* CreditLedger.CreditLedger
        assert.strictEqual((yield* ledger.balance(accountId)).usd, 1_000_000_000)
      }))
  }
)
