import { assert } from "@effect/vitest"
import { CreditLedger, Money } from "@tollgate/core"
import { Contract, RedisCluster, RedisServer } from "@tollgate/testkit"
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
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

let counter = 0
const fresh = (prefix = "acct") => `${prefix}-${process.pid}-${Date.now()}-${counter++}`

const usage = (requestId: string): CreditLedger.UsageDetails => ({
  sku: "text-parser",
  units: 1,
  pricePerUnit: nano(10_000_000),
  requestId,
  executionMs: 3
})

const allJournal = (ledger: CreditLedger.CreditLedger["Service"], accountId: string) =>
  Effect.gen(function*() {
    const entries: Array<CreditLedger.JournalEntry> = []
    let after: string | undefined
    while (true) {
      const page = yield* ledger.journal(accountId, after === undefined ? { limit: 500 } : { after, limit: 500 })
      for (const entry of page) entries.push(entry)
      if (page.length < 500) return entries
      after = page.at(-1)!.id
    }
  })

/** The balance the journal says: settled USD and USD held by open holds. */
const journalSums = (entries: ReadonlyArray<CreditLedger.JournalEntry>) => {
  let usd = 0
  let heldUsd = 0
  for (const entry of entries) {
    if (entry.currency !== "USD") continue
    usd += entry.delta
    heldUsd += entry.held
  }
  return { usd, heldUsd }
}

const reason = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => "reason" in error ? String(error.reason) : error._tag)

Contract.contract(
  "CreditLedger contract: balances, holds and an append-only journal, each reference applied once",
  [
    { name: "memory", layer: CreditLedger.layerMemory },
    RedisServer.backend(redis, (url) => CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ url })))),
    RedisCluster.backend(cluster, (seeds) => CreditLedgerRedis.layerRedis().pipe(Layer.provide(RedisConnection.layer({ cluster: seeds }))))
  ],
  (it) => {
    it.effect("a top-up and a grant raise the USD balance, and the balance equals the journal's sum", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: Money.usd(5), reference: "pay-1" })
        const receipt = yield* ledger.grant({ accountId: account, amount: nano(250), reference: "grant-1" })
        assert.strictEqual(receipt.balance.usd, 5_000_000_250)
        assert.strictEqual(receipt.entry.kind, "grant")
        const sums = journalSums(yield* allJournal(ledger, account))
        assert.strictEqual(sums.usd, 5_000_000_250)
      }))

    it.effect("a retried top-up with the same reference moves money once; another amount is refused", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        const first = yield* ledger.topUp({ accountId: account, amount: Money.usd(5), reference: "pay-1" })
        const again = yield* ledger.topUp({ accountId: account, amount: Money.usd(5), reference: "pay-1" })
        assert.deepStrictEqual(again.entry, first.entry)
        assert.strictEqual(again.balance.usd, Money.usd(5))
        assert.strictEqual(yield* reason(ledger.topUp({ accountId: account, amount: Money.usd(6), reference: "pay-1" })), "ReferenceConflict")
        assert.strictEqual((yield* allJournal(ledger, account)).length, 1)
      }))

    it.effect("amounts must be positive integers of nano-USD", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        assert.strictEqual(yield* reason(ledger.topUp({ accountId: account, amount: nano(0), reference: "r" })), "InvalidAmount")
        assert.strictEqual(yield* reason(ledger.grant({ accountId: account, amount: nano(-5), reference: "r" })), "InvalidAmount")
        assert.strictEqual((yield* ledger.balance(account)).usd, 0)
      }))

    it.effect("a hold reserves the amount; capture takes at most the hold and releases the rest", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(1000), reference: "pay" })
        const hold = yield* ledger.hold({ accountId: account, amount: nano(600), reference: "req-1", priceVersion: "v1" })
        assert.strictEqual(hold.before.availableUsd, 1000)
        assert.strictEqual(hold.priceVersion, "v1")
        const during = yield* ledger.balance(account)
        assert.deepStrictEqual([during.usd, during.heldUsd, during.availableUsd], [1000, 600, 400])
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "req-1", amount: nano(601), usage: usage("r1") })), "ExceedsHold")
        const settled = yield* ledger.capture({ accountId: account, reference: "req-1", amount: nano(250), usage: usage("r1") })
        assert.deepStrictEqual([settled.fromUsd, settled.balance.usd, settled.balance.heldUsd], [250, 750, 0])
        const replay = yield* ledger.capture({ accountId: account, reference: "req-1", amount: nano(250), usage: usage("r1") })
        assert.strictEqual(replay.balance.usd, 750)
        const sums = journalSums(yield* allJournal(ledger, account))
        assert.deepStrictEqual(sums, { usd: 750, heldUsd: 0 })
      }))

    it.effect("a hold the balance cannot cover is refused and changes nothing", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
        assert.strictEqual(yield* reason(ledger.hold({ accountId: account, amount: nano(101), reference: "h", priceVersion: "v" })), "InsufficientFunds")
        const balance = yield* ledger.balance(account)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [100, 0])
        assert.strictEqual((yield* allJournal(ledger, account)).length, 1)
      }))

    it.effect("a hold funded outside the balance (an x402 upto permit, FUNDED_HOLD_PREFIX) needs no credit, holds none, and its capture records the usage at the captured amount with the balance unchanged", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        const empty = yield* ledger.hold({ accountId: account, amount: nano(600), reference: `${CreditLedger.FUNDED_HOLD_PREFIX}a`, priceVersion: "v" })
        assert.deepStrictEqual([empty.fromAllowance, empty.fromUsd], [0, 0])
        yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
        const hold = yield* ledger.hold({ accountId: account, amount: nano(600), reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`, priceVersion: "v" })
        assert.deepStrictEqual([hold.fromUsd, hold.before.availableUsd], [0, 100])
        const during = yield* ledger.balance(account)
        assert.deepStrictEqual([during.usd, during.heldUsd, during.availableUsd], [100, 0, 100])
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`, amount: nano(601), usage: usage("r1") })), "ExceedsHold")
        const settled = yield* ledger.capture({ accountId: account, reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`, amount: nano(250), usage: usage("r1") })
        assert.deepStrictEqual([settled.fromUsd, settled.fromAllowance, settled.balance.usd, settled.balance.heldUsd], [0, 0, 100, 0])
        const released = yield* ledger.release(account, `${CreditLedger.FUNDED_HOLD_PREFIX}a`)
        assert.deepStrictEqual([released.usd, released.heldUsd], [100, 0])
        const page = yield* ledger.usage(account, { order: "asc", limit: 10 })
        assert.deepStrictEqual(page.entries.map((entry) => [entry.amount, entry.currency, entry.requestId]), [[250, "USD", "r1"]])
        assert.deepStrictEqual(journalSums(yield* allJournal(ledger, account)), { usd: 100, heldUsd: 0 })
      }))

    it.effect("a released hold returns its amount; it cannot be captured afterwards; releasing again changes nothing", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
        yield* ledger.hold({ accountId: account, amount: nano(100), reference: "h", priceVersion: "v" })
        const released = yield* ledger.release(account, "h")
        assert.strictEqual(released.availableUsd, 100)
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "h", amount: nano(1), usage: usage("r") })), "HoldClosed")
        yield* ledger.release(account, "h")
        assert.strictEqual(yield* reason(ledger.release(account, "nope")), "UnknownHold")
        assert.strictEqual((yield* allJournal(ledger, account)).length, 3)
      }))

    it.effect("a hold not settled before its expiry is released by the next operation", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
        yield* ledger.hold({ accountId: account, amount: nano(100), reference: "h", priceVersion: "v", ttlMs: 1_000 })
        assert.strictEqual((yield* ledger.balance(account)).availableUsd, 0)
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual((yield* ledger.balance(account)).availableUsd, 100)
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "h", amount: nano(1), usage: usage("r") })), "HoldClosed")
      }))

    it.effect("the sweep releases expired holds without an operation on their account; the hold stats come from the store", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(1_000), reference: "pay" })
        const before = yield* ledger.holdStats
        yield* ledger.hold({ accountId: account, amount: nano(100), reference: "h1", priceVersion: "v", ttlMs: 1_000 })
        yield* ledger.hold({ accountId: account, amount: nano(200), reference: "h2", priceVersion: "v", ttlMs: 1_000 })
        const placed = yield* ledger.holdStats
        assert.strictEqual(placed.open, before.open + 2)
        assert.strictEqual(placed.held, before.held + 300)
        yield* TestClock.adjust("2 seconds")
        assert.isAtLeast(yield* ledger.sweepExpired, 1)
        // The journal is read without sweeping: the releases are there because the sweep wrote them.
        const journal = yield* ledger.journal(account, { limit: 100 })
        assert.deepStrictEqual(journal.filter((entry) => entry.kind === "release").map((entry) => entry.reference).sort(), ["h1", "h2"])
        const swept = yield* ledger.holdStats
        assert.isAtMost(swept.open, before.open)
        assert.isAtMost(swept.held, before.held)
        assert.strictEqual(yield* ledger.sweepExpired, 0)
      }))

    it.effect("a closed hold is remembered for CLOSED_HOLD_RETENTION_MS, then forgotten; its journal and usage entries stay", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        // Off the minute: Redis deletes closed holds a minute's worth at a time, and still forgets each on time.
        yield* TestClock.adjust(12_345)
        yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
        yield* ledger.hold({ accountId: account, amount: nano(40), reference: "captured", priceVersion: "v" })
        yield* ledger.hold({ accountId: account, amount: nano(10), reference: "released", priceVersion: "v" })
        const settled = yield* ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })
        yield* ledger.release(account, "released")
        yield* TestClock.adjust(CreditLedger.CLOSED_HOLD_RETENTION_MS - 1)
        const replayed = yield* ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })
        assert.deepStrictEqual([replayed.fromUsd, replayed.fromAllowance], [settled.fromUsd, settled.fromAllowance])
        yield* ledger.release(account, "released")
        yield* TestClock.adjust(1)
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })), "UnknownHold")
        assert.strictEqual(yield* reason(ledger.release(account, "released")), "UnknownHold")
        const balance = yield* ledger.balance(account)
        assert.deepStrictEqual([balance.usd, balance.heldUsd], [70, 0])
        assert.strictEqual((yield* allJournal(ledger, account)).length, 5)
        assert.strictEqual((yield* ledger.usage(account, { limit: 10, order: "asc" })).entries.length, 1)
      }))

    it.effect("a refund credits the USD balance once per reference", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.refund({ accountId: account, amount: nano(40), reference: "refund-1" })
        yield* ledger.refund({ accountId: account, amount: nano(40), reference: "refund-1" })
        assert.strictEqual((yield* ledger.balance(account)).usd, 40)
      }))

    it.effect("the staked-token allowance (1 token = 1 USD a day) is spent first and renews daily", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: Money.usd(10), reference: "pay" })
        yield* ledger.stake({ accountId: account, tokens: 2, reference: "stake-1" })
        assert.strictEqual((yield* ledger.balance(account)).availableAllowance, Money.usd(2))
        const hold = yield* ledger.hold({ accountId: account, amount: Money.usd(3), reference: "h1", priceVersion: "v" })
        assert.deepStrictEqual([hold.fromAllowance, hold.fromUsd], [Money.usd(2), Money.usd(1)])
        const settled = yield* ledger.capture({ accountId: account, reference: "h1", amount: Money.usd(2), usage: usage("r1") })
        assert.deepStrictEqual([settled.fromAllowance, settled.fromUsd], [Money.usd(2), 0])
        assert.deepStrictEqual([settled.balance.usd, settled.balance.availableAllowance], [Money.usd(10), 0])
        yield* TestClock.adjust("1 day")
        assert.strictEqual((yield* ledger.balance(account)).availableAllowance, Money.usd(2))
        const page = yield* ledger.usage(account, { order: "asc", limit: 10 })
        assert.deepStrictEqual(page.entries.map((entry) => [entry.currency, entry.amount]), [["DIEM", Money.usd(2)]])
      }))

    it.effect("usage entries come from captures, with the request's details", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: Money.usd(1), reference: "pay" })
        yield* ledger.hold({ accountId: account, amount: nano(5000), reference: "h", priceVersion: "v" })
        yield* ledger.capture({
          accountId: account,
          reference: "h",
          amount: nano(4000),
          usage: { sku: "chat:qwen3-4b", units: 40, pricePerUnit: nano(100), requestId: "req-9", executionMs: 12, promptTokens: 30, completionTokens: 10, notes: "n" }
        })
        const { entries } = yield* ledger.usage(account, { order: "desc", limit: 10 })
        assert.strictEqual(entries.length, 1)
        assert.deepInclude({ ...entries[0]! } as Record<string, unknown>, {
          sku: "chat:qwen3-4b", units: 40, pricePerUnit: 100, amount: 4000, currency: "USD",
          requestId: "req-9", executionMs: 12, promptTokens: 30, completionTokens: 10, notes: "n"
        })
      }))

    it.effect("usage pages: every entry appears exactly once while entries are inserted between page reads", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: Money.usd(1), reference: "pay" })
        let n = 0
        const charge = Effect.gen(function*() {
          const reference = `h${n++}`
          yield* ledger.hold({ accountId: account, amount: nano(10), reference, priceVersion: "v" })
          yield* ledger.capture({ accountId: account, reference, amount: nano(10), usage: usage(reference) })
          yield* TestClock.adjust("1 millis")
        })
        for (let i = 0; i < 25; i++) yield* charge
        for (const order of ["desc", "asc"] as const) {
          const before = n
          const seen: Array<string> = []
          let after: string | undefined
          do {
            const page: CreditLedger.UsagePage = yield* ledger.usage(account, { order, limit: 4, after })
            for (const entry of page.entries) seen.push(entry.requestId)
            after = page.next
            yield* charge
            yield* charge
          } while (after !== undefined)
          assert.strictEqual(new Set(seen).size, seen.length)
          const expected = Array.from({ length: before }, (_, i) => `h${i}`)
          if (order === "desc") assert.deepStrictEqual(seen, expected.reverse())
          else assert.deepStrictEqual(seen.slice(0, before), expected)
        }
        const offset = yield* ledger.usageOffset(account, { order: "asc", limit: 5, offset: 5 })
        assert.strictEqual(offset.total, n)
        assert.deepStrictEqual(offset.entries.map((entry) => entry.requestId), ["h5", "h6", "h7", "h8", "h9"])
      }))

    it.effect("usage queries filter by time range and currency", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: Money.usd(1), reference: "pay" })
        const start = yield* Clock.currentTimeMillis
        for (let i = 0; i < 6; i++) {
          yield* ledger.hold({ accountId: account, amount: nano(10), reference: `h${i}`, priceVersion: "v" })
          yield* ledger.capture({ accountId: account, reference: `h${i}`, amount: nano(10), usage: usage(`h${i}`) })
          yield* TestClock.adjust("1 second")
        }
        const page = yield* ledger.usage(account, { order: "asc", limit: 10, from: start + 2000, to: start + 4000 })
        assert.deepStrictEqual(page.entries.map((entry) => entry.requestId), ["h2", "h3", "h4"])
        assert.strictEqual((yield* ledger.usage(account, { order: "asc", limit: 10, currency: "DIEM" })).entries.length, 0)
      }))

    it.effect("1,000 concurrent holds against a balance that affords exactly 250: 250 succeed, the balance ends at 0", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const account = fresh()
        yield* ledger.topUp({ accountId: account, amount: nano(250 * 625), reference: "pay" })
        const results = yield* Effect.forEach(
          Array.from({ length: 1000 }, (_, i) => i),
          (i) => Effect.result(ledger.hold({ accountId: account, amount: nano(625), reference: `h${i}`, priceVersion: "v" })),
          { concurrency: "unbounded" }
        )
        const won = results.filter((result) => result._tag === "Success").length
        assert.strictEqual(won, 250)
        const held = yield* ledger.balance(account)
        assert.deepStrictEqual([held.availableUsd, held.heldUsd], [0, 250 * 625])
        yield* Effect.forEach(
          results.flatMap((result, i) => result._tag === "Success" ? [i] : []),
          (i) => ledger.capture({ accountId: account, reference: `h${i}`, amount: nano(625), usage: usage(`h${i}`) }),
          { concurrency: 50 }
        )
        const after = yield* ledger.balance(account)
        assert.deepStrictEqual([after.usd, after.heldUsd], [0, 0])
        assert.strictEqual(journalSums(yield* allJournal(ledger, account)).usd, 0)
      }))

    it.effect("properties: random interleavings never make a balance negative; balance = journal sum after each step; replaying a reference changes nothing", () =>
      Effect.gen(function*() {
        const ledger = yield* Ledger
        const services = yield* Effect.context<CreditLedger.CreditLedger>()
        const op = fc.oneof(
          fc.record({ op: fc.constant("topUp" as const), amount: fc.integer({ min: 1, max: 1000 }), ref: fc.integer({ min: 0, max: 5 }) }),
          fc.record({ op: fc.constant("hold" as const), amount: fc.integer({ min: 0, max: 800 }), ref: fc.integer({ min: 0, max: 8 }) }),
          fc.record({ op: fc.constant("capture" as const), amount: fc.integer({ min: 0, max: 800 }), ref: fc.integer({ min: 0, max: 8 }) }),
          fc.record({ op: fc.constant("release" as const), amount: fc.constant(0), ref: fc.integer({ min: 0, max: 8 }) }),
          fc.record({ op: fc.constant("refund" as const), amount: fc.integer({ min: 1, max: 300 }), ref: fc.integer({ min: 0, max: 5 }) })
        )
        const apply = (account: string, step: { readonly op: string; readonly amount: number; readonly ref: number }) => {
          const amount = nano(step.amount)
          switch (step.op) {
            case "topUp":
              return ledger.topUp({ accountId: account, amount, reference: `t${step.ref}` })
            case "refund":
              return ledger.refund({ accountId: account, amount, reference: `f${step.ref}` })
            case "hold":
              return ledger.hold({ accountId: account, amount, reference: `h${step.ref}`, priceVersion: "v" })
            case "capture":
              return ledger.capture({ accountId: account, reference: `h${step.ref}`, amount, usage: usage(`h${step.ref}`) })
            default:
              return ledger.release(account, `h${step.ref}`)
          }
        }
        const check = (account: string) =>
          Effect.gen(function*() {
            const balance = yield* ledger.balance(account)
            const sums = journalSums(yield* allJournal(ledger, account))
            assert.isAtLeast(balance.usd, 0)
            assert.isAtLeast(balance.availableUsd, 0)
            assert.deepStrictEqual({ usd: balance.usd, heldUsd: balance.heldUsd }, sums)
            return balance
          })
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), (steps) =>
              Effect.runPromise(Effect.gen(function*() {
                const account = fresh("prop")
                for (const step of steps) {
                  yield* Effect.ignore(apply(account, step))
                  const balance = yield* check(account)
                  const journal = (yield* allJournal(ledger, account)).length
                  yield* Effect.ignore(apply(account, step))
                  const replayed = yield* check(account)
                  assert.deepStrictEqual(replayed, balance)
                  assert.strictEqual((yield* allJournal(ledger, account)).length, journal)
                }
              }).pipe(Effect.provide(services)))),
            { numRuns: 40, seed: 20261122 }
          )
        )
      }))
  },
  { timeout: 60_000 }
)

/** Runs the previous release's ledger script (`fixtures/previous-ledger.ts`) on an account. */
const previous = (accountId: string, op: string, ...args: ReadonlyArray<string | number>) =>
  Effect.gen(function*() {
    const { sendCommand } = yield* RedisConnection.RedisConnection
    const now = yield* Clock.currentTimeMillis
    const keys = CreditLedgerRedis.accountKeys(CreditLedgerRedis.defaultPrefix, accountId)
    const command = ["EVAL", previousLedger(), String(keys.length), ...keys, op, String(now), ...args.map(String)]
    return (yield* Effect.promise(() => sendCommand(command, keys[0]))) as readonly [string, ReadonlyArray<string> | string, ReadonlyArray<string>?]
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
    RedisCluster.backend(cluster, (seeds) => CreditLedgerRedis.layerRedis().pipe(Layer.provideMerge(RedisConnection.layer({ cluster: seeds }))))
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
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "released", amount: nano(1), usage: usage("r") })), "HoldClosed")
        yield* ledger.hold({ accountId: account, amount: nano(5), reference: "new", priceVersion: "v" })
        yield* TestClock.adjust(1_000)
        const expired = yield* ledger.balance(account)
        assert.deepStrictEqual([expired.usd, expired.heldUsd], [970, 5])
        const journal = yield* allJournal(ledger, account)
        assertJournalInOrder(journal)
        assert.deepStrictEqual(journal.map((entry) => entry.kind), ["grant", "hold", "hold", "capture", "hold", "release", "hold", "release"])
        assert.deepStrictEqual(journalSums(journal), { usd: 970, heldUsd: 5 })
        yield* TestClock.adjust(CreditLedger.CLOSED_HOLD_RETENTION_MS - 1_001)
        yield* ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })
        yield* TestClock.adjust(1)
        assert.strictEqual(yield* reason(ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })), "UnknownHold")
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
