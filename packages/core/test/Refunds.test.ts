import { assert, describe, it } from "@effect/vitest"
import { CreditLedger, Money, Refunds } from "@tollgate/core"
import { Effect } from "effect"

const Ledger = CreditLedger.CreditLedger
const nano = Money.unsafeNano

/** A call of `price` nano-USD on an account with 1 USD and `stakedTokens` of daily allowance. */
const chargedCall = (accountId: string, price: number, stakedTokens: number) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger
    yield* ledger.grant({ accountId, amount: Money.usd(1), reference: "seed" })
    if (stakedTokens > 0) yield* ledger.stake({ accountId, tokens: stakedTokens, reference: "stake" })
    const before = yield* ledger.balance(accountId)
    yield* ledger.hold({ accountId, amount: nano(price), reference: "hold-1", priceVersion: "v1" })
    yield* ledger.capture({
      accountId,
      reference: "hold-1",
      amount: nano(price),
      usage: { sku: "text-parser", units: 1, pricePerUnit: nano(price), requestId: "req-1", executionMs: 1 }
    })
    return before
  })

describe("A refund returns only what the call was charged in USD: the staked allowance is never refunded", () => {
  it.effect("a call paid 1 USD from the allowance and 0.5 USD from the balance is refunded 0.5 USD by default", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const before = yield* chargedCall("acct", 1_500_000_000, 1)
      const refund = yield* Refunds.refundCall(ledger, { accountId: "acct", requestId: "req-1" })
      assert.strictEqual(refund.charged, 500_000_000)
      assert.strictEqual(refund.amount, 500_000_000)
      const after = yield* ledger.balance("acct")
      assert.strictEqual(after.usd, before.usd)
      assert.strictEqual(after.availableAllowance, 0)
    }).pipe(Effect.provide(CreditLedger.layerMemory)))

  it.effect("a call paid wholly from the allowance is a 400 and credits nothing", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const before = yield* chargedCall("acct", 10_000_000, 1)
      const error = yield* Effect.flip(Refunds.refundCall(ledger, { accountId: "acct", requestId: "req-1" }))
      assert.deepStrictEqual({ tag: error._tag, message: error.message }, {
        tag: "InvalidRequest",
        message: "Request req-1 was charged nothing in USD (the staked-token allowance is not refunded)"
      })
      assert.strictEqual((yield* ledger.balance("acct")).usd, before.usd)
    }).pipe(Effect.provide(CreditLedger.layerMemory)))
})

describe("A call is refunded once: concurrent refunds of it move money once", () => {
  it.effect("20 concurrent refunds of a 0.01 USD call credit 0.01 USD, and all answer the same entry", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger
      const before = yield* chargedCall("acct", 10_000_000, 0)
      const refunds = yield* Effect.all(
        Array.from({ length: 20 }, () => Refunds.refundCall(ledger, { accountId: "acct", requestId: "req-1" })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(new Set(refunds.map((refund) => refund.receipt.entry.id)).size, 1)
      assert.strictEqual((yield* ledger.balance("acct")).usd, before.usd)
    }).pipe(Effect.provide(CreditLedger.layerMemory)))
})
