/**
 * The contract of spend caps (`KeyCaps` through the admission store): a capped key's open quotes
 * and captures never pass its cap in the period; a refused call takes nothing. Written once;
 * `@tollgate/core` runs it against the memory stores and `@tollgate/redis` against Redis and Redis
 * Cluster. Its fixtures are exported for the Redis-only tests beside it.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Admission, AuthStore, CreditLedger, KeyCaps, Money } from "@tollgate/core"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"
import { usage } from "./CreditLedger.ts"

const nano = Money.unsafeNano
let counter = 0
const fresh = () => `cap-${process.pid}-${Date.now()}-${counter++}`

const KEY = "key_capped"

/** An account with `funds` of credit and a key capped at `usd` nano-USD per `period`. */
export const capped = (usd: number, period: KeyCaps.LimitPeriod, funds = 1_000_000_000) =>
  Effect.gen(function*() {
    const store = yield* AuthStore.AuthStore
    const ledger = yield* CreditLedger.CreditLedger
    const caps = yield* KeyCaps.KeyCaps
    const accountId = fresh()
    yield* store.insertAccount({ id: accountId, createdAt: new Date(0) })
    yield* store.putKey({ id: KEY, accountId, type: "INFERENCE", tier: "default", description: "capped", createdAt: new Date(0) })
    yield* caps.set(accountId, KEY, { usd: nano(usd), period })
    yield* ledger.grant({ accountId, amount: nano(funds), reference: "funds" })
    return accountId
  })

export const admit = (accountId: string, reference: string, amount: number, ttlMs?: number) =>
  Effect.gen(function*() {
    const store = yield* Admission.AdmissionStore
    return yield* store.admit({
      now: yield* Clock.currentTimeMillis,
      accountId,
      spendKeyId: KEY,
      counters: [],
      hold: { reference, amount: nano(amount), priceVersion: "v1", ...(ttlMs === undefined ? {} : { ttlMs }) }
    })
  })

export const settle = (accountId: string, reference: string, amount: number) =>
  Effect.gen(function*() {
    const store = yield* Admission.AdmissionStore
    return yield* store.settle({
      now: yield* Clock.currentTimeMillis,
      spendKeyId: KEY,
      capture: { accountId, reference, amount: nano(amount), usage: usage(reference) },
      adjustments: []
    })
  })

export const giveBack = (accountId: string, reference: string) =>
  Effect.gen(function*() {
    const store = yield* Admission.AdmissionStore
    yield* store.giveBack({ now: yield* Clock.currentTimeMillis, accountId, reference, spendKeyId: KEY, adjustments: [] })
  })

/** The key's spend in the current period, as key listings show it. */
export const spent = (accountId: string) =>
  Effect.gen(function*() {
    const caps = yield* KeyCaps.KeyCaps
    const found = yield* caps.read(accountId, [KEY], yield* Clock.currentTimeMillis)
    return found.get(KEY)?.spent ?? -1
  })

export const heldUsd = (accountId: string) =>
  Effect.flatMap(CreditLedger.CreditLedger, (ledger) => Effect.map(ledger.balance(accountId), (balance) => balance.heldUsd))

/** Moves the clock forward to `target` (ms since the epoch). */
const advanceTo = (target: number) => Effect.flatMap(Clock.currentTimeMillis, (now) => TestClock.adjust(target - now))

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(
  backends: ReadonlyArray<Contract.Backend<Admission.AdmissionStore | AuthStore.AuthStore | CreditLedger.CreditLedger | KeyCaps.KeyCaps, E>>
) =>
  Contract.contract(
    "Spend caps: a capped key's open quotes and captures never pass its cap in the period; a refused call takes nothing",
    backends,
    (it) => {
      it.effect("calls are admitted while the open quotes fit the cap; the one that would pass it is refused with the cap and the spend, and holds nothing", () =>
        Effect.gen(function*() {
          const accountId = yield* capped(1_000, "EPOCH")
          for (const reference of ["r1", "r2", "r3"]) assert.strictEqual((yield* admit(accountId, reference, 300))._tag, "Admitted")
          const refused = yield* admit(accountId, "r4", 300)
          assert.deepStrictEqual(refused, { _tag: "CapReached", cap: { usd: nano(1_000), period: "EPOCH" }, spent: nano(900) })
          assert.strictEqual(yield* heldUsd(accountId), 900)
          assert.strictEqual(yield* spent(accountId), 900)
          assert.strictEqual((yield* admit(accountId, "r5", 100))._tag, "Admitted")
          assert.strictEqual(yield* spent(accountId), 1_000)
        }))

      it.effect("a settlement counts what was captured instead of the quote; a give-back counts nothing", () =>
        Effect.gen(function*() {
          const accountId = yield* capped(1_000, "MONTH")
          yield* admit(accountId, "r1", 600)
          yield* settle(accountId, "r1", 200)
          assert.strictEqual(yield* spent(accountId), 200)
          assert.strictEqual((yield* admit(accountId, "r2", 800))._tag, "Admitted")
          assert.strictEqual((yield* admit(accountId, "r3", 1))._tag, "CapReached")
          yield* giveBack(accountId, "r2")
          assert.strictEqual(yield* spent(accountId), 200)
          assert.strictEqual((yield* admit(accountId, "r4", 800))._tag, "Admitted")
        }))

      it.effect("a hold that expired unsettled stops counting once the cap would refuse; a hold a job captured on its own counts its capture", () =>
        Effect.gen(function*() {
          const accountId = yield* capped(1_000, "LIFETIME")
          yield* admit(accountId, "r1", 800, 1_000)
          yield* admit(accountId, "r2", 100)
          const ledger = yield* CreditLedger.CreditLedger
          // A deferred job captures through the ledger, outside the admission store.
          yield* ledger.capture({ accountId, reference: "r2", amount: nano(40), usage: usage("r2") })
          yield* TestClock.adjust("2 seconds")
          assert.strictEqual((yield* admit(accountId, "r3", 900))._tag, "Admitted")
          assert.strictEqual(yield* spent(accountId), 940)
          // The next hold that expires is found the same way.
          yield* admit(accountId, "r4", 60, 1_000)
          yield* TestClock.adjust("2 seconds")
          assert.strictEqual((yield* admit(accountId, "r5", 60))._tag, "Admitted")
          assert.strictEqual(yield* spent(accountId), 1_000)
        }))

      it.effect("EPOCH starts afresh at 00:00 UTC, MONTH on the 1st, LIFETIME never", () =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const start = new Date(now)
          // 23:59 UTC on the last day of the month after the clock's.
          yield* advanceTo(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 2, 1) - 60_000)
          const daily = yield* capped(500, "EPOCH")
          const monthly = yield* capped(500, "MONTH")
          const forever = yield* capped(500, "LIFETIME")
          for (const accountId of [daily, monthly, forever]) {
            yield* admit(accountId, "r1", 500)
            yield* settle(accountId, "r1", 500)
            assert.strictEqual((yield* admit(accountId, "r2", 1))._tag, "CapReached")
          }
          yield* TestClock.adjust("2 minutes")
          for (const accountId of [daily, monthly]) {
            assert.strictEqual((yield* admit(accountId, "r3", 500))._tag, "Admitted")
            yield* settle(accountId, "r3", 500)
          }
          assert.strictEqual((yield* admit(forever, "r3", 1))._tag, "CapReached")
          yield* TestClock.adjust("1 day")
          assert.strictEqual((yield* admit(daily, "r4", 500))._tag, "Admitted")
          assert.strictEqual((yield* admit(monthly, "r4", 1))._tag, "CapReached")
          assert.deepStrictEqual([yield* spent(daily), yield* spent(monthly), yield* spent(forever)], [500, 500, 500])
        }))

      it.effect("a cap removed admits again and counts nothing; a cap set again starts from that period's spend", () =>
        Effect.gen(function*() {
          const accountId = yield* capped(100, "EPOCH")
          yield* admit(accountId, "r1", 100)
          const caps = yield* KeyCaps.KeyCaps
          yield* caps.set(accountId, KEY, { usd: nano(150), period: "EPOCH" })
          assert.strictEqual(yield* spent(accountId), 100)
          assert.strictEqual((yield* admit(accountId, "r2", 60))._tag, "CapReached")
          yield* caps.set(accountId, KEY, undefined)
          assert.strictEqual((yield* admit(accountId, "r3", 10_000))._tag, "Admitted")
          assert.deepStrictEqual(yield* caps.read(accountId, [KEY], yield* Clock.currentTimeMillis), new Map())
        }))

      it.effect("1,000 concurrent calls never pass the cap by one nano-USD: 250 fit, 750 take nothing; after settling, only the room left is admitted", () =>
        Effect.gen(function*() {
          // Room for 250 quotes of 625 and 624 nano-USD more, which no quote fits.
          const cap = 250 * 625 + 624
          const accountId = yield* capped(cap, "EPOCH")
          const round = (name: string) =>
            Effect.forEach(
              Array.from({ length: 1000 }, (_, i) => `${name}${i}`),
              (reference) => Effect.map(admit(accountId, reference, 625), (reply) => ({ reference, reply })),
              { concurrency: "unbounded" }
            )
          const first = (yield* round("a")).filter(({ reply }) => reply._tag === "Admitted")
          assert.strictEqual(first.length, 250)
          assert.strictEqual(yield* heldUsd(accountId), 250 * 625)
          assert.strictEqual(yield* spent(accountId), 250 * 625)
          yield* Effect.forEach(first, ({ reference }) => settle(accountId, reference, 600), { concurrency: 50 })
          assert.strictEqual(yield* spent(accountId), 250 * 600)
          const second = (yield* round("b")).filter(({ reply }) => reply._tag === "Admitted")
          // 6,874 nano-USD of room: 10 quotes of 625.
          assert.strictEqual(second.length, 10)
          assert.strictEqual(yield* spent(accountId), 250 * 600 + 10 * 625)
          assert.isAtMost(yield* spent(accountId), cap)
        }))
    },
    { timeout: 60_000 }
  )
