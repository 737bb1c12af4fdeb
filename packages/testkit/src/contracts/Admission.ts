/**
 * The contract of the admission store: one admission takes every rate limit and the hold, all or
 * nothing; one settlement or give-back closes them. Written once;
 * `@tollgate/core` runs it against the memory stores and `@tollgate/redis` against Redis, Redis
 * Cluster, and the script's other ways of running (EVALSHA, grouped per account). Its fixtures are
 * exported for the Redis-only tests beside it.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import { Admission, AuthStore, CreditLedger, IdempotencyStore, Money, RateLimiter } from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as Contract from "../Contract.ts"
import { reason, usage } from "./CreditLedger.ts"

const nano = Money.unsafeNano
let counter = 0
const fresh = () => `acct-${process.pid}-${Date.now()}-${counter++}`

/**
 * The admission over the memory stores, as `@tollgate/core` runs the contract.
 *
 * @category fixtures
 */
export const memory = Admission.layerMemory.pipe(Layer.provideMerge(Layer.mergeAll(
  AuthStore.layerMemory,
  RateLimiter.layerMemory(),
  CreditLedger.layerMemory,
  IdempotencyStore.layerMemory
)))

/** The contract's one rate limit: `requests` a minute for the account. */
export const limit = (accountId: string, requests: number): RateLimiter.Limit => ({
  type: "user",
  key: `${accountId}:contract`,
  hashTag: accountId,
  requests: { limit: requests, windowMs: 60_000 }
})

/** An account with `funds` of credit. */
export const account = (funds: number) =>
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    const accountId = fresh()
    if (funds > 0) yield* ledger.grant({ accountId, amount: nano(funds), reference: "funds" })
    return accountId
  })

/** Admits a call of `amount` under the contract's limit, with the plan it was counted by. */
export const admit = (
  accountId: string,
  options: {
    readonly reference: string
    readonly amount: number
    readonly requests: number
    readonly ttlMs?: number
  }
) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.RateLimiter
    const store = yield* Admission.AdmissionStore
    const now = yield* Clock.currentTimeMillis
    const plan = limiter.plan([limit(accountId, options.requests)], now)
    const reply = yield* store.admit({
      now,
      accountId,
      counters: plan.counters,
      hold: {
        reference: options.reference,
        amount: nano(options.amount),
        priceVersion: "v1",
        ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs })
      }
    })
    return { reply, plan }
  })

/** Requests used of the contract limit, consuming nothing. */
export const used = (accountId: string) =>
  Effect.gen(function*() {
    const limiter = yield* RateLimiter.RateLimiter
    const [status] = yield* limiter.inspect([limit(accountId, 1_000)])
    return status?.requests?.used ?? -1
  })

/** The kinds of an account's journal entries, oldest first. */
export const journalKinds = (accountId: string) =>
  Effect.gen(function*() {
    const ledger = yield* CreditLedger.CreditLedger
    const entries = yield* ledger.journal(accountId, { limit: 100 })
    return entries.map((entry) => entry.kind)
  })

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(
  backends: ReadonlyArray<
    Contract.Backend<Admission.AdmissionStore | CreditLedger.CreditLedger | IdempotencyStore.IdempotencyStore | RateLimiter.RateLimiter, E>
  >
) =>
  Contract.contract(
    "Admission contract: one admission takes every rate limit and the hold, all or nothing; one settlement closes them",
    backends,
    (it) => {
      it.effect("a hold the balance cannot cover refuses before a rate limit, and takes no request", () =>
        Effect.gen(function*() {
          const accountId = yield* account(100)
          const { reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 0 })
          assert.strictEqual(reply._tag, "HoldRefused")
          if (reply._tag === "HoldRefused") assert.strictEqual(reply.error.reason, "InsufficientFunds")
          const affordable = yield* admit(accountId, { reference: "r2", amount: 625, requests: 10 })
          assert.strictEqual(affordable.reply._tag, "HoldRefused")
          assert.strictEqual(yield* used(accountId), 0)
          assert.deepStrictEqual(yield* journalKinds(accountId), ["grant"])
        }))

      it.effect("a rate limit that refuses places no hold", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const first = yield* admit(accountId, { reference: "r1", amount: 625, requests: 1 })
          assert.strictEqual(first.reply._tag, "Admitted")
          const second = yield* admit(accountId, { reference: "r2", amount: 625, requests: 1 })
          assert.strictEqual(second.reply._tag, "RateLimited")
          const ledger = yield* CreditLedger.CreditLedger
          assert.strictEqual((yield* ledger.balance(accountId)).heldUsd, 625)
          assert.strictEqual(yield* used(accountId), 1)
          assert.deepStrictEqual(yield* journalKinds(accountId), ["grant", "hold"])
        }))

      it.effect("an admission is what the ledger and the limiter see: the hold with the balance before it, the request counted", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const { plan, reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10 })
          assert.strictEqual(reply._tag, "Admitted")
          if (reply._tag !== "Admitted") return
          assert.deepStrictEqual([reply.hold.amount, reply.hold.fromUsd, reply.hold.before.availableUsd], [625, 625, 10_000])
          assert.strictEqual(plan.admitted(reply.states).headers["x-ratelimit-remaining-requests"], "9")
          const ledger = yield* CreditLedger.CreditLedger
          const balance = yield* ledger.balance(accountId)
          assert.deepStrictEqual([balance.usd, balance.heldUsd, balance.availableUsd], [10_000, 625, 9_375])
          assert.strictEqual(yield* used(accountId), 1)
        }))

      it.effect("a settlement captures with its usage entry and completes the idempotency record in the same step", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const records = yield* IdempotencyStore.IdempotencyStore
          assert.strictEqual((yield* records.claim(accountId, "idem-1", "body"))._tag, "Claimed")
          const { plan, reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10 })
          if (reply._tag !== "Admitted") return assert.fail(reply._tag)
          const store = yield* Admission.AdmissionStore
          const response = { status: 200, headers: { "content-type": "application/json" }, body: "e30=" }
          const settlement = yield* store.settle({
            now: yield* Clock.currentTimeMillis,
            capture: { accountId, reference: "r1", amount: nano(500), usage: usage("req-1") },
            adjustments: plan.admitted(reply.states).settlement({}),
            completion: { scope: accountId, key: "idem-1", response }
          })
          assert.deepStrictEqual([settlement.fromUsd, settlement.balance.usd, settlement.balance.heldUsd], [500, 9_500, 0])
          const ledger = yield* CreditLedger.CreditLedger
          const page = yield* ledger.usage(accountId, { order: "asc", limit: 10 })
          assert.deepStrictEqual(page.entries.map((entry) => [entry.requestId, entry.amount]), [["req-1", 500]])
          assert.deepStrictEqual(yield* records.claim(accountId, "idem-1", "body"), { _tag: "Replay", response })
        }))

      it.effect("a hold funded by an x402 upto permit (FUNDED_HOLD_PREFIX) is admitted without credit, still counts the rate limit, and its settlement records the usage with the balance unchanged", () =>
        Effect.gen(function*() {
          const accountId = yield* account(100)
          const reference = `${CreditLedger.FUNDED_HOLD_PREFIX}r1`
          const { plan, reply } = yield* admit(accountId, { reference, amount: 625, requests: 1 })
          if (reply._tag !== "Admitted") return assert.fail(reply._tag)
          assert.deepStrictEqual([reply.hold.fromUsd, reply.hold.fromAllowance, reply.hold.before.availableUsd], [0, 0, 100])
          const refused = yield* admit(accountId, { reference: `${CreditLedger.FUNDED_HOLD_PREFIX}r2`, amount: 625, requests: 1 })
          assert.strictEqual(refused.reply._tag, "RateLimited")
          const store = yield* Admission.AdmissionStore
          const settlement = yield* store.settle({
            now: yield* Clock.currentTimeMillis,
            capture: { accountId, reference, amount: nano(500), usage: usage("req-1") },
            adjustments: plan.admitted(reply.states).settlement({}),
            completion: undefined
          })
          assert.deepStrictEqual([settlement.fromUsd, settlement.balance.usd, settlement.balance.heldUsd], [0, 100, 0])
          const ledger = yield* CreditLedger.CreditLedger
          const page = yield* ledger.usage(accountId, { order: "asc", limit: 10 })
          assert.deepStrictEqual(page.entries.map((entry) => [entry.requestId, entry.amount]), [["req-1", 500]])
        }))

      it.effect("a give-back releases the hold, returns the reservations and frees the idempotency key", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const records = yield* IdempotencyStore.IdempotencyStore
          yield* records.claim(accountId, "idem-1", "body")
          const { plan, reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10 })
          if (reply._tag !== "Admitted") return assert.fail(reply._tag)
          const store = yield* Admission.AdmissionStore
          yield* store.giveBack({
            now: yield* Clock.currentTimeMillis,
            accountId,
            reference: "r1",
            adjustments: plan.admitted(reply.states).cancellation(),
            abandon: { scope: accountId, key: "idem-1" }
          })
          const ledger = yield* CreditLedger.CreditLedger
          const balance = yield* ledger.balance(accountId)
          assert.deepStrictEqual([balance.usd, balance.heldUsd], [10_000, 0])
          assert.strictEqual(yield* used(accountId), 0)
          assert.strictEqual((yield* records.claim(accountId, "idem-1", "body"))._tag, "Claimed")
        }))

      it.effect("an admission repeated under its reference answers the hold already placed, with its own price version, and places no second hold", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const first = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10 })
          if (first.reply._tag !== "Admitted") return assert.fail(first.reply._tag)
          const store = yield* Admission.AdmissionStore
          const limiter = yield* RateLimiter.RateLimiter
          const now = yield* Clock.currentTimeMillis
          const again = yield* store.admit({
            now,
            accountId,
            counters: limiter.plan([limit(accountId, 10)], now).counters,
            hold: { reference: "r1", amount: nano(625), priceVersion: "v2" }
          })
          if (again._tag !== "Admitted") return assert.fail(again._tag)
          assert.deepStrictEqual(
            [again.hold.amount, again.hold.fromUsd, again.hold.fromAllowance, again.hold.priceVersion, again.hold.expiresAt],
            [625, 625, 0, "v1", first.reply.hold.expiresAt]
          )
          assert.deepStrictEqual([again.hold.before.usd, again.hold.before.heldUsd, again.hold.before.availableUsd], [10_000, 625, 9_375])
          const ledger = yield* CreditLedger.CreditLedger
          assert.strictEqual((yield* ledger.balance(accountId)).heldUsd, 625)
        }))

      it.effect("a hold not settled before its expiry is released by the account's next admission, and settling it then finds it closed", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          const first = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10, ttlMs: 1_000 })
          if (first.reply._tag !== "Admitted") return assert.fail(first.reply._tag)
          yield* admit(accountId, { reference: "r2", amount: 625, requests: 10 })
          yield* TestClock.adjust("2 seconds")
          const { reply } = yield* admit(accountId, { reference: "r3", amount: 625, requests: 10 })
          if (reply._tag !== "Admitted") return assert.fail(reply._tag)
          assert.deepStrictEqual([reply.hold.before.heldUsd, reply.hold.before.availableUsd], [625, 9_375])
          const store = yield* Admission.AdmissionStore
          const late = store.settle({
            now: yield* Clock.currentTimeMillis,
            capture: { accountId, reference: "r1", amount: nano(625), usage: usage("req-1") },
            adjustments: first.plan.admitted(first.reply.states).settlement({})
          })
          assert.strictEqual(yield* reason(late), "HoldClosed")
          assert.deepStrictEqual(yield* journalKinds(accountId), ["grant", "hold", "hold", "release", "hold"])
        }))

      it.effect("a settlement repeated within CLOSED_HOLD_RETENTION_MS of the first answers the same; after it the hold is unknown", () =>
        Effect.gen(function*() {
          const accountId = yield* account(10_000)
          // Off the minute: Redis deletes closed holds a minute's worth at a time, and still forgets each on time.
          yield* TestClock.adjust(12_345)
          const { reply } = yield* admit(accountId, { reference: "r1", amount: 625, requests: 10 })
          if (reply._tag !== "Admitted") return assert.fail(reply._tag)
          const store = yield* Admission.AdmissionStore
          const settle = Effect.gen(function*() {
            return yield* store.settle({
              now: yield* Clock.currentTimeMillis,
              capture: { accountId, reference: "r1", amount: nano(500), usage: usage("req-1") },
              adjustments: []
            })
          })
          const first = yield* settle
          yield* TestClock.adjust(CreditLedger.CLOSED_HOLD_RETENTION_MS - 1)
          const again = yield* settle
          assert.deepStrictEqual([again.fromUsd, again.balance.usd], [first.fromUsd, 9_500])
          yield* TestClock.adjust(1)
          assert.strictEqual(yield* reason(settle), "UnknownHold")
          const ledger = yield* CreditLedger.CreditLedger
          assert.strictEqual((yield* ledger.usage(accountId, { order: "asc", limit: 10 })).entries.length, 1)
        }))

      it.effect("1,000 concurrent admissions against a balance that affords exactly 250: 250 admitted, the rest take no request, all settle to 0", () =>
        Effect.gen(function*() {
          const accountId = yield* account(250 * 625)
          const replies = yield* Effect.forEach(
            Array.from({ length: 1000 }, (_, i) => i),
            (i) => admit(accountId, { reference: `h${i}`, amount: 625, requests: 10_000 }),
            { concurrency: "unbounded" }
          )
          const admitted = replies.flatMap(({ plan, reply }, i) => reply._tag === "Admitted" ? [{ i, plan, reply }] : [])
          assert.strictEqual(admitted.length, 250)
          assert.strictEqual(replies.filter(({ reply }) => reply._tag === "HoldRefused").length, 750)
          assert.strictEqual(yield* used(accountId), 250)
          const store = yield* Admission.AdmissionStore
          const now = yield* Clock.currentTimeMillis
          yield* Effect.forEach(admitted, ({ i, plan, reply }) =>
            store.settle({
              now,
              capture: { accountId, reference: `h${i}`, amount: nano(625), usage: usage(`h${i}`) },
              adjustments: reply._tag === "Admitted" ? plan.admitted(reply.states).settlement({}) : []
            }), { concurrency: 50 })
          const ledger = yield* CreditLedger.CreditLedger
          const after = yield* ledger.balance(accountId)
          assert.deepStrictEqual([after.usd, after.heldUsd], [0, 0])
        }))
    },
    { timeout: 60_000 }
  )
