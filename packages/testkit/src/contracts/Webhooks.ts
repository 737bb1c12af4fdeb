/**
 * The contract of webhook events: stored once per crossing from the admission store, the ledger and
 * the pending settlements. Written once; `@tollgate/core` runs it with the memory webhook store and
 * `@tollgate/redis` with the Redis one.
 *
 * @since 0.1.0
 */
import { assert } from "@effect/vitest"
import {
  Admission,
  AuthStore,
  CreditLedger,
  IdempotencyStore,
  KeyCaps,
  Money,
  PendingSettlements,
  RateLimiter,
  Webhooks
} from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import * as Contract from "../Contract.ts"

const nano = Money.unsafeNano

/**
 * Webhooks over `store`, watching memory stores: one endpoint, never sent to here (no sender). Every
 * backend of `run` is built with it.
 *
 * @category fixtures
 */
export const observed = (store: Layer.Layer<Webhooks.WebhookStore>) =>
  Webhooks.layerObserve.pipe(
    Layer.provideMerge(Webhooks.layer({
      endpoints: [{
        url: "http://127.0.0.1:1/hooks",
        secret: `whsec_${Buffer.from("contract webhook secret, 32 byte").toString("base64")}`
      }],
      balanceBelow: nano(1_000),
      capShare: 0.5
    })),
    Layer.provideMerge(store),
    Layer.provideMerge(Admission.layerMemory.pipe(Layer.provideMerge(Layer.mergeAll(
      AuthStore.layerMemory,
      RateLimiter.layerMemory(),
      CreditLedger.layerMemory,
      IdempotencyStore.layerMemory,
      PendingSettlements.layerMemory
    ))))
  )

let counter = 0
const fresh = () => `hooks-${process.pid}-${Date.now()}-${counter++}`

/** The events stored for `accountId` (or naming `needle`), oldest first. */
const events = (needle: string) =>
  Effect.gen(function*() {
    const store = yield* Webhooks.WebhookStore
    const log = yield* store.list(500)
    return log.filter((delivery) => delivery.payload.includes(needle)).reverse().map((delivery) => {
      const body = JSON.parse(delivery.payload) as { type: string; data: Record<string, unknown> }
      return [body.type, body.data] as const
    })
  })

const call = (accountId: string, reference: string, amount: number, keyId?: string) =>
  Effect.gen(function*() {
    const store = yield* Admission.AdmissionStore
    const now = yield* Clock.currentTimeMillis
    const reply = yield* store.admit({
      now,
      accountId,
      spendKeyId: keyId,
      counters: [],
      hold: { reference, amount: nano(amount), priceVersion: "v1" }
    })
    if (reply._tag !== "Admitted") return reply._tag
    yield* store.settle({
      now,
      spendKeyId: keyId,
      capture: {
        accountId,
        reference,
        amount: nano(amount),
        usage: { sku: "text-parser", units: 1, pricePerUnit: nano(amount), requestId: reference, executionMs: 1 }
      },
      adjustments: []
    })
    return reply._tag
  })

/**
 * Runs the contract against each backend.
 *
 * @category constructors
 */
export const run = <E>(backends: ReadonlyArray<Contract.Backend<Layer.Success<ReturnType<typeof observed>>, E>>) =>
  Contract.contract(
    "Webhook events: stored once per crossing from the admission store, the ledger and the pending settlements",
    backends,
    (it) => {
      it.effect("the balance falling under the threshold fires once; a credit back over it re-arms it", () =>
        Effect.gen(function*() {
          const accountId = fresh()
          const ledger = yield* CreditLedger.CreditLedger
          yield* ledger.grant({ accountId, amount: nano(1_500), reference: "funds" })
          for (const reference of ["r1", "r2", "r3", "r4"]) yield* call(accountId, reference, 200)
          assert.deepStrictEqual(yield* events(accountId), [
            ["balance.below_threshold", { accountId, availableUsd: "0.0000009", thresholdUsd: "0.000001" }]
          ])
          yield* ledger.grant({ accountId, amount: nano(500), reference: "more" })
          yield* call(accountId, "r5", 300)
          assert.strictEqual((yield* events(accountId)).length, 2)
        }))

      it.effect("a key's cap share and cap fire once each in the period, also when the cap refuses", () =>
        Effect.gen(function*() {
          const accountId = fresh()
          const ledger = yield* CreditLedger.CreditLedger
          const caps = yield* KeyCaps.KeyCaps
          yield* ledger.grant({ accountId, amount: nano(1_000_000), reference: "funds" })
          yield* caps.set(accountId, "key_1", { usd: nano(300), period: "EPOCH" })
          const replies = []
          for (const reference of ["r1", "r2", "r3", "r4", "r5"]) replies.push(yield* call(accountId, reference, 100, "key_1"))
          assert.deepStrictEqual(replies, ["Admitted", "Admitted", "Admitted", "CapReached", "CapReached"])
          const cap = { accountId, keyId: "key_1", limitPeriod: "EPOCH", capUsd: "0.0000003" }
          // Events of one millisecond come in no particular order.
          const found = (yield* events(accountId)).toSorted(([a], [b]) => a.localeCompare(b))
          assert.deepStrictEqual(found, [
            ["key.cap_reached", { ...cap, spentUsd: "0.0000003" }],
            ["key.cap_share_reached", { ...cap, spentUsd: "0.0000002", share: 0.5 }]
          ])
        }))

      it.effect("a top-up credited fires once per reference; a settlement recorded as pending fires once with its transaction", () =>
        Effect.gen(function*() {
          const accountId = fresh()
          const ledger = yield* CreditLedger.CreditLedger
          yield* ledger.topUp({ accountId, amount: Money.usd(5), reference: `x402:eip155:8453:${accountId}` })
          yield* ledger.topUp({ accountId, amount: Money.usd(5), reference: `x402:eip155:8453:${accountId}` })
          assert.deepStrictEqual(yield* events(accountId), [
            ["topup.credited", { accountId, amountUsd: "5", reference: `x402:eip155:8453:${accountId}`, balanceUsd: "5" }]
          ])
          const pending = yield* PendingSettlements.PendingSettlements
          const payment = `0xsignature-${accountId}`
          yield* Effect.promise(() => pending.set(payment, "0xabc"))
          yield* Effect.promise(() => pending.set(payment, "0xabc"))
          assert.deepStrictEqual(yield* events(payment), [["settlement.pending_timeout", { payment, transactionHash: "0xabc" }]])
        }))
    }
  )
