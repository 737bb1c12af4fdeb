/**
 * The contract of `CreditLedger`: balances, holds and an append-only journal, each reference
 * applied once. Written once; `@tollgate/core` runs it against the memory layer and
 * `@tollgate/redis` against Redis and Redis Cluster. Its fixtures are exported for the Redis-only
 * tests beside it.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { CreditLedger, Money } from "@tollgate/core"
import { Clock, Effect, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import * as Contract from "../Contract.ts"

const Ledger = CreditLedger.CreditLedger
const nano = Money.unsafeNano

let counter = 0
/** An account id no other test uses. */
export const fresh = (prefix = "acct") => `${prefix}-${process.pid}-${Date.now()}-${counter++}`

/** The usage a capture records for `requestId`. */
export const usage = (requestId: string): CreditLedger.UsageDetails => ({
  sku: "text-parser",
  units: 1,
  pricePerUnit: nano(10_000_000),
  requestId,
  executionMs: 3
})

/** Every journal entry of an account, oldest first. */
export const allJournal = (ledger: CreditLedger.CreditLedger["Service"], accountId: string) =>
  Stream.runCollect(CreditLedger.journalStream(ledger, accountId))

/** The balance the journal says: settled USD and USD held by open holds. */
export const journalSums = (entries: ReadonlyArray<CreditLedger.JournalEntry>) => {
  let usd = 0
  let heldUsd = 0
  for (const entry of entries) {
    if (entry.currency !== "USD") continue
    usd += entry.delta
    heldUsd += entry.held
  }
  return { usd, heldUsd }
}

/** The reason of a refusal, or its tag. */
export const reason = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => "reason" in error ? String(error.reason) : error._tag)

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<CreditLedger.CreditLedger, E>>) =>
  Contract.contract(
    "CreditLedger contract: balances, holds and an append-only journal, each reference applied once",
    backends,
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
          assert.strictEqual(
            yield* reason(ledger.topUp({ accountId: account, amount: Money.usd(6), reference: "pay-1" })),
            "ReferenceConflict"
          )
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
          assert.strictEqual(
            yield* reason(ledger.capture({ accountId: account, reference: "req-1", amount: nano(601), usage: usage("r1") })),
            "ExceedsHold"
          )
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
          assert.strictEqual(
            yield* reason(ledger.hold({ accountId: account, amount: nano(101), reference: "h", priceVersion: "v" })),
            "InsufficientFunds"
          )
          const balance = yield* ledger.balance(account)
          assert.deepStrictEqual([balance.usd, balance.heldUsd], [100, 0])
          assert.strictEqual((yield* allJournal(ledger, account)).length, 1)
        }))

      it.effect("a hold funded outside the balance (an x402 upto permit, FUNDED_HOLD_PREFIX) needs no credit, holds none, and its capture records the usage at the captured amount with the balance unchanged", () =>
        Effect.gen(function*() {
          const ledger = yield* Ledger
          const account = fresh()
          const empty = yield* ledger.hold({
            accountId: account,
            amount: nano(600),
            reference: `${CreditLedger.FUNDED_HOLD_PREFIX}a`,
            priceVersion: "v"
          })
          assert.deepStrictEqual([empty.fromAllowance, empty.fromUsd], [0, 0])
          yield* ledger.topUp({ accountId: account, amount: nano(100), reference: "pay" })
          const hold = yield* ledger.hold({
            accountId: account,
            amount: nano(600),
            reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`,
            priceVersion: "v"
          })
          assert.deepStrictEqual([hold.fromUsd, hold.before.availableUsd], [0, 100])
          const during = yield* ledger.balance(account)
          assert.deepStrictEqual([during.usd, during.heldUsd, during.availableUsd], [100, 0, 100])
          assert.strictEqual(
            yield* reason(
              ledger.capture({
                accountId: account,
                reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`,
                amount: nano(601),
                usage: usage("r1")
              })
            ),
            "ExceedsHold"
          )
          const settled = yield* ledger.capture({
            accountId: account,
            reference: `${CreditLedger.FUNDED_HOLD_PREFIX}b`,
            amount: nano(250),
            usage: usage("r1")
          })
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
          assert.strictEqual(
            yield* reason(ledger.capture({ accountId: account, reference: "h", amount: nano(1), usage: usage("r") })),
            "HoldClosed"
          )
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
          assert.strictEqual(
            yield* reason(ledger.capture({ accountId: account, reference: "h", amount: nano(1), usage: usage("r") })),
            "HoldClosed"
          )
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
          assert.strictEqual(
            yield* reason(ledger.capture({ accountId: account, reference: "captured", amount: nano(30), usage: usage("r") })),
            "UnknownHold"
          )
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
            usage: {
              sku: "chat:qwen3-4b",
              units: 40,
              pricePerUnit: nano(100),
              requestId: "req-9",
              executionMs: 12,
              promptTokens: 30,
              completionTokens: 10,
              notes: "n"
            }
          })
          const { entries } = yield* ledger.usage(account, { order: "desc", limit: 10 })
          assert.strictEqual(entries.length, 1)
          assert.deepInclude({ ...entries[0]! } as Record<string, unknown>, {
            sku: "chat:qwen3-4b",
            units: 40,
            pricePerUnit: 100,
            amount: 4000,
            currency: "USD",
            requestId: "req-9",
            executionMs: 12,
            promptTokens: 30,
            completionTokens: 10,
            notes: "n"
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

      it.effect("1,000 concurrent holds against a balance that affords exactly 250: 250 succeed, the balance ends at 0, and the journal streams every entry once", () =>
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
          // More than one read of the stream: the top-up, 250 holds and 250 captures.
          const journal = yield* allJournal(ledger, account)
          assert.deepStrictEqual([journal.length, new Set(journal.map((entry) => entry.id)).size], [501, 501])
          assert.strictEqual(journalSums(journal).usd, 0)
          const charges = yield* Stream.runCollect(CreditLedger.usageStream(ledger, account, { order: "desc" }))
          assert.strictEqual(charges.length, 250)
        }))

      it.effect("properties: random interleavings never make a balance negative; balance = journal sum after each step; replaying a reference changes nothing", () =>
        Effect.gen(function*() {
          const ledger = yield* Ledger
          const services = yield* Effect.context<CreditLedger.CreditLedger>()
          const op = fc.oneof(
            fc.record({
              op: fc.constant("topUp" as const),
              amount: fc.integer({ min: 1, max: 1000 }),
              ref: fc.integer({ min: 0, max: 5 })
            }),
            fc.record({ op: fc.constant("hold" as const), amount: fc.integer({ min: 0, max: 800 }), ref: fc.integer({ min: 0, max: 8 }) }),
            fc.record({
              op: fc.constant("capture" as const),
              amount: fc.integer({ min: 0, max: 800 }),
              ref: fc.integer({ min: 0, max: 8 })
            }),
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
                Effect.runPromise(
                  Effect.gen(function*() {
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
                  }).pipe(Effect.provide(services))
                )),
              { numRuns: 40, seed: 20261122 }
            )
          )
        }))
    },
    { timeout: 60_000 }
  )
