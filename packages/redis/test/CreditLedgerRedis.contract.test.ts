import { assert } from "@effect/vitest"
import { CreditLedger, Money } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import * as CreditLedgerContract from "@tollgate/testkit/contracts/CreditLedger"
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll } from "vitest"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"
import { previousLedger } from "./fixtures/previous-ledger.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())
const cluster = await RedisCluster.start()
afterAll(() => cluster.stop())

const Ledger = CreditLedger.CreditLedger
const nano = Money.unsafeNano
const { allJournal, fresh, journalSums, reason, usage } = CreditLedgerContract

CreditLedgerContract.run([
  RedisServer.backend(redis, (url) => CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url })))),
  RedisCluster.backend(cluster, (seeds) => CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
])

/** Runs the previous release's ledger script (`fixtures/previous-ledger.ts`) on an account. */
const previous = (accountId: string, op: string, ...args: ReadonlyArray<string | number>) =>
  Effect.gen(function*() {
    const { sendCommand } = yield* RedisConnection.RedisConnection
    const now = yield* Clock.currentTimeMillis
    const keys = CreditLedgerRedis.accountKeys(CreditLedgerRedis.defaultPrefix, accountId)
    const command = ["EVAL", previousLedger(), String(keys.length), ...keys, op, String(now), ...args.map(String)]
    return (yield* Effect.promise(() => sendCommand(command, keys[0]))) as readonly [
      string,
      ReadonlyArray<string> | string,
      ReadonlyArray<string>?
    ]
  })

const assertJournalInOrder = (entries: ReadonlyArray<CreditLedger.JournalEntry>) => {
  const ids = entries.map((entry) => entry.id)
  assert.deepStrictEqual([...ids].sort(CreditLedger.compareIds), ids)
  assert.strictEqual(new Set(ids).size, ids.length)
}

Contract.contract(
  "CreditLedger on Redis across a rolling deploy: an account the previous release's script wrote reads the same, and both scripts can serve it side by side",
  [
    RedisServer.backend(redis, (url) => CreditLedgerRedis.layerRedis().pipe(Layer.provideMerge(RedisConnection.layer({ url })))),
    RedisCluster.backend(
      cluster,
      (seeds) => CreditLedgerRedis.layerRedis().pipe(Layer.provideMerge(RedisConnection.layer({ cluster: seeds })))
    )
  ],
  (it) => {
    it.effect("balances, references, open and closed holds and the journal's ids carry over; its holds expire and are forgotten on time", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* TestClock.adjust(12_345)
        yield* previous(account, "grant", "funds", 1000)
        yield* previous(account, "hold", "open", 100, "v", 1_000)
        yield* previous(account, "hold", "captured", 40, "v", 60_000)
        yield* previous(account, "capture", "captured", 30, JSON.stringify(usage("r")))
        yield* previous(account, "hold", "released", 10, "v", 60_000)
        yield* previous(account, "release", "released")
        const balance = yield* ledger.balance(account)
        assert.deepStrictEqual([balance.usd, balance.heldUsd, balance.availableUsd], [970, 100, 870])
        const again = yield* ledger.grant({ accountId: account, amount: nano(1000), reference: "funds" })
        assert.strictEqual(again.balance.usd, 970)
        assert.strictEqual(yield* reason(ledger.grant({ accountId: account, amount: nano(1), reference: "funds" })), "ReferenceConflict")
        const replayed = yield* ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })
        assert.deepStrictEqual([replayed.fromUsd, replayed.balance.usd], [30, 970])
        assert.strictEqual(
          yield* reason(ledger.capture({ accountId: account, reference: "released", amount: nano(1), usage: usage("r") })),
          "HoldClosed"
        )
        yield* ledger.hold({ accountId: account, amount: nano(5), reference: "new", priceVersion: "v" })
        yield* TestClock.adjust(1_000)
        const expired = yield* ledger.balance(account)
        assert.deepStrictEqual([expired.usd, expired.heldUsd], [970, 5])
        const journal = yield* allJournal(ledger, account)
        assertJournalInOrder(journal)
        assert.deepStrictEqual(journal.map((entry) => entry.kind), [
          "grant",
          "hold",
          "hold",
          "capture",
          "hold",
          "release",
          "hold",
          "release"
        ])
        assert.deepStrictEqual(journalSums(journal), { usd: 970, heldUsd: 5 })
        yield* TestClock.adjust(CreditLedger.CLOSED_HOLD_RETENTION_MS - 1_001)
        yield* ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })
        yield* TestClock.adjust(1)
        assert.strictEqual(
          yield* reason(ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })),
          "UnknownHold"
        )
        assert.strictEqual(yield* reason(ledger.release(account, "released")), "UnknownHold")
      }))

    it.effect("a hold the previous release places on an account this one serves expires on time, and each reads the other's holds", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.grant({ accountId: account, amount: nano(1000), reference: "funds" })
        yield* ledger.hold({ accountId: account, amount: nano(100), reference: "new", priceVersion: "v", ttlMs: 60_000 })
        yield* previous(account, "hold", "old", 200, "v", 1_000)
        assert.strictEqual((yield* ledger.balance(account)).heldUsd, 300)
        yield* TestClock.adjust(1_000)
        assert.strictEqual((yield* ledger.balance(account)).heldUsd, 100)
        const settled = yield* ledger.capture({ accountId: account, reference: "new", amount: nano(60), usage: usage("r") })
        const [status, detail, balance] = yield* previous(account, "capture", "new", 60, JSON.stringify(usage("r")))
        assert.deepStrictEqual([status, detail], ["ok", ["0", "60"]])
        assert.deepStrictEqual(CreditLedgerRedis.toBalance(balance ?? []), settled.balance)
        yield* previous(account, "hold", "old-2", 50, "v", 60_000)
        const captured = yield* ledger.capture({ accountId: account, reference: "old-2", amount: nano(50), usage: usage("r2") })
        assert.deepStrictEqual([captured.fromUsd, captured.balance.usd, captured.balance.heldUsd], [50, 890, 0])
        const journal = yield* allJournal(ledger, account)
        assertJournalInOrder(journal)
        assert.deepStrictEqual(journalSums(journal), { usd: 890, heldUsd: 0 })
      }))
  }
)
