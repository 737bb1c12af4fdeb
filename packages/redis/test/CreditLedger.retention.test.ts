import { assert, describe, layer } from "@effect/vitest"
import { CreditLedger, Money } from "@tollgate/core"
import { Contract, RedisServer } from "@tollgate/testkit"
import { Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll } from "vitest"
import * as CreditLedgerRedis from "../src/CreditLedgerRedis.ts"
import * as RedisConnection from "../src/RedisConnection.ts"

const redis = await RedisServer.acquire()
afterAll(() => redis.stop())

const Ledger = CreditLedger.CreditLedger
const nano = Money.unsafeNano
const DAY = CreditLedger.DAY_MS
let counter = 0
const fresh = () => `acct-${process.pid}-${Date.now()}-${counter++}`

/** `count` paid calls of 10 nano-USD, each a hold and its capture. */
const calls = (accountId: string, count: number, tag: string) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    for (let i = 0; i < count; i++) {
      const reference = `${tag}-${i}`
      yield* ledger.hold({ accountId, amount: nano(10), reference, priceVersion: "v" })
      yield* ledger.capture({
        accountId,
        reference,
        amount: nano(10),
        usage: { sku: "text-parser", units: 1, pricePerUnit: nano(10), requestId: reference, executionMs: 1 }
      })
    }
  })

const allUsage = (accountId: string) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    return yield* ledger.usage(accountId, { order: "asc", limit: 10_000 })
  })

// A stream node holds up to 100 entries (`stream-node-max-entries`), and Redis trims whole nodes.
const REDIS_NODE = 100

Contract.contract(
  "CreditLedger retention: entries older than the retention leave the journal and the usage report; the balance never depends on them",
  [
    { name: "memory", layer: CreditLedger.layerMemoryWith({ retentionMs: DAY }) },
    RedisServer.backend(
      redis,
      (url) => CreditLedgerRedis.layerRedis({ retentionMs: DAY }).pipe(Layer.provide(RedisConnection.layer({ url })))
    )
  ],
  (it, backend) => {
    it.effect("calls older than a day are trimmed as new ones arrive (Redis: to within one stream node); the balance counts them all", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const accountId = fresh()
        yield* TestClock.setTime(10 * DAY)
        yield* ledger.grant({ accountId, amount: nano(1_000_000), reference: "funds" })
        yield* calls(accountId, 250, "old")
        yield* TestClock.adjust(2 * DAY)
        yield* calls(accountId, 5, "new")
        const usage = (yield* allUsage(accountId)).entries
        const old = usage.filter((entry) => entry.requestId.startsWith("old"))
        assert.strictEqual(usage.filter((entry) => entry.requestId.startsWith("new")).length, 5)
        assert.isAtMost(old.length, backend === "redis" ? REDIS_NODE : 0)
        const journal = yield* ledger.journal(accountId, { limit: 10_000 })
        assert.isAtMost(journal.filter((entry) => entry.timestamp < 11 * DAY).length, backend === "redis" ? REDIS_NODE : 0)
        const balance = yield* ledger.balance(accountId)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [1_000_000 - 255 * 10, 0])
      }))
  }
)

describe("CreditLedger retention in memory: at most `maxEntries` usage entries, journal entries and closed holds per account", () => {
  layer(CreditLedger.layerMemoryWith({ maxEntries: 100 }))((it) => {
    it.effect("1,000 calls keep the newest 100 (plus at most a sixteenth before a trim), and the balance counts all 1,000", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const accountId = fresh()
        yield* ledger.grant({ accountId, amount: nano(1_000_000), reference: "funds" })
        yield* calls(accountId, 1000, "call")
        const usage = (yield* allUsage(accountId)).entries
        assert.isAtLeast(usage.length, 100)
        assert.isAtMost(usage.length, 106)
        assert.strictEqual(usage.at(-1)!.requestId, "call-999")
        assert.isAtMost((yield* ledger.journal(accountId, { limit: 10_000 })).length, 106)
        const balance = yield* ledger.balance(accountId)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [1_000_000 - 1000 * 10, 0])
        // The oldest closed holds are forgotten first.
        const forgotten = yield* Effect.flip(ledger.release(accountId, "call-0"))
        assert.strictEqual(forgotten._tag === "LedgerError" ? forgotten.reason : forgotten._tag, "UnknownHold")
        assert.deepStrictEqual(
          (yield* ledger.capture({
            accountId,
            reference: "call-999",
            amount: nano(10),
            usage: { sku: "text-parser", units: 1, pricePerUnit: nano(10), requestId: "again", executionMs: 1 }
          })).fromUsd,
          10
        )
      }))
  })
})
