/**
 * A paid call's store steps, each all or nothing: `admit` takes a key's spend cap, every rate
 * limit and the credit hold; `settle` captures the hold with its usage entry, settles the
 * rate-limit reservations and completes the `Idempotency-Key` record; `giveBack` undoes an
 * admission whose call failed. Whatever refuses, nothing is written.
 *
 * **When to use**
 *
 * Through the metered pipeline (`PaidCall`), which confirms the caller's key (`Auth`) before the
 * body is read and then makes one `admit` and one `settle` or `giveBack` per call. A store of its
 * own implements `AdmissionStore` and passes the contract suite
 * (`@tollgate/testkit/contracts/Admission`).
 *
 * **Details**
 *
 * The rules stay with their services: which limits apply and what a 429 says (`RateLimiter.plan`),
 * how a hold splits between allowance and USD and what a capture appends (the `CreditLedger`
 * store's primitives). This module adds the order of the checks: the spend cap (`KeyCaps`) first,
 * then the hold, whose refusal comes before a rate limit's (a payment is what a client can act
 * on). `layerMemory` runs each operation as one synchronous step over the memory stores'
 * primitives; its twin on Redis is one script call (`@tollgate/redis` `AdmissionStoreRedis`).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import * as CreditLedger from "./CreditLedger.ts"
import type { ServiceUnavailable } from "./Errors.ts"
import * as IdempotencyStore from "./IdempotencyStore.ts"
import * as KeyCaps from "./KeyCaps.ts"
import type * as Money from "./Money.ts"
import * as RateLimiter from "./RateLimiter.ts"

/** @category models */
export interface AdmitInput {
  readonly now: number
  readonly accountId: string
  /**
   * The API key whose spend cap (`KeyCaps`) the hold counts against, checked first: a call the cap
   * refuses takes nothing.
   */
  readonly spendKeyId?: string | undefined
  /** The counters of `RateLimiter.plan`, taken all or nothing. */
  readonly counters: ReadonlyArray<RateLimiter.Counter>
  readonly hold: Omit<CreditLedger.HoldInput, "accountId">
}

/**
 * What `admit` found. Only `Admitted` wrote anything.
 *
 * @category models
 */
export type AdmitReply =
  | { readonly _tag: "Admitted"; readonly states: ReadonlyArray<RateLimiter.CounterState>; readonly hold: CreditLedger.Hold }
  | { readonly _tag: "CapReached"; readonly cap: KeyCaps.SpendCap; readonly spent: Money.Nano }
  | { readonly _tag: "HoldRefused"; readonly error: CreditLedger.LedgerError }
  | { readonly _tag: "RateLimited"; readonly states: ReadonlyArray<RateLimiter.CounterState> }

/** @category models */
export interface SettleInput {
  readonly now: number
  readonly capture: CreditLedger.CaptureInput
  /** The key whose cap counted the hold (`AdmitInput.spendKeyId`): it now counts the capture. */
  readonly spendKeyId?: string | undefined
  /** The rate-limit reservations settled to what was used (`Admission.settlement`). */
  readonly adjustments: ReadonlyArray<RateLimiter.Adjustment>
  /** The `Idempotency-Key` record completed with the call's response. */
  readonly completion?: { readonly scope: string; readonly key: string; readonly response: IdempotencyStore.StoredResponse } | undefined
}

/** @category models */
export interface GiveBackInput {
  readonly now: number
  readonly accountId: string
  /** The hold released. */
  readonly reference: string
  /** The key whose cap counted the hold (`AdmitInput.spendKeyId`): it counts nothing of it now. */
  readonly spendKeyId?: string | undefined
  /** The rate-limit reservations given back (`Admission.settlement` of nothing). */
  readonly adjustments: ReadonlyArray<RateLimiter.Adjustment>
  /** The `Idempotency-Key` record freed. */
  readonly abandon?: { readonly scope: string; readonly key: string } | undefined
}

/** @category services */
export class AdmissionStore extends Context.Service<AdmissionStore, {
  /**
   * Whether `settle` completes the `Idempotency-Key` record in its own step, not in a store call
   * after it: then whatever the caller sends after handing a settlement over finds the record
   * complete or the settlement still to run, never a settlement run without its record.
   */
  readonly completesRecordsInStep: boolean
  /**
   * Whether `settle` runs in this process with no I/O (the memory stores): a response gains
   * nothing by going before such a settlement, so it waits for it.
   */
  readonly settlesInProcess: boolean
  readonly admit: (input: AdmitInput) => Effect.Effect<AdmitReply, ServiceUnavailable>
  readonly settle: (input: SettleInput) => Effect.Effect<CreditLedger.Settlement, CreditLedger.LedgerError | ServiceUnavailable>
  /** Releases the hold (a closed one stays closed), gives back the reservations, frees the key. */
  readonly giveBack: (input: GiveBackInput) => Effect.Effect<void, ServiceUnavailable>
}>()("@tollgate/core/Admission/AdmissionStore") {}

/**
 * Both operations over the memory stores, each one synchronous step: nothing else runs between its
 * checks and its writes. The idempotency record is completed after the step when the idempotency
 * store is not the memory one (a shared Redis store behind memory stores). Its twin on Redis is the
 * admission's Lua (`@tollgate/redis` `src/lua/admission.lua`), which orders the checks the same way.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<
  AdmissionStore,
  never,
  KeyCaps.Memory | RateLimiter.StoreMemory | CreditLedger.Memory | IdempotencyStore.IdempotencyStore
> = Layer.effect(
  AdmissionStore,
  Effect.gen(function*() {
    const caps = yield* KeyCaps.Memory
    const limits = yield* RateLimiter.StoreMemory
    const ledger = yield* CreditLedger.Memory
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const records = Option.getOrUndefined(yield* Effect.serviceOption(IdempotencyStore.Memory))

    const admit = (input: AdmitInput): AdmitReply => {
      const { accountId, counters, now } = input
      const { spendKeyId } = input
      if (spendKeyId !== undefined) {
        const reached = caps.check(accountId, spendKeyId, input.hold.amount, now, (reference) => {
          const state = ledger.holdState(accountId, reference, now)
          return state === "open" ? undefined : state ?? "forgotten"
        })
        if (reached !== undefined) return { _tag: "CapReached", ...reached }
      }
      const hold = { ...input.hold, accountId }
      // The take writes only when every counter has room; a hold refused after it takes the
      // counters back before the step ends, so nobody sees either.
      const taken = limits.take(now, counters, "checked")
      if (!taken.admitted) {
        const held = ledger.hold(hold, now, true)
        return held instanceof CreditLedger.LedgerError
          ? { _tag: "HoldRefused", error: held }
          : { _tag: "RateLimited", states: taken.states }
      }
      const held = ledger.hold(hold, now)
      if (held instanceof CreditLedger.LedgerError) {
        limits.adjust(
          counters.flatMap((counter) =>
            counter.amount === 0 ? [] : [{
              key: counter.key,
              field: counter.field,
              rolling: counter.rolling,
              bucket: Math.floor(now / counter.bucketMs),
              delta: -counter.amount
            }]
          ),
          now
        )
        return { _tag: "HoldRefused", error: held }
      }
      if (spendKeyId !== undefined) caps.reserve(accountId, spendKeyId, hold.reference, hold.amount, held.expiresAt)
      return { _tag: "Admitted", states: taken.states, hold: held }
    }

    return AdmissionStore.of({
      completesRecordsInStep: records !== undefined,
      settlesInProcess: true,
      admit: (input) => Effect.sync(() => admit(input)),
      settle: ({ adjustments, capture, completion, now, spendKeyId }) =>
        Effect.suspend((): Effect.Effect<CreditLedger.Settlement, CreditLedger.LedgerError | ServiceUnavailable> => {
          const settled = ledger.capture(capture, now)
          if (settled instanceof CreditLedger.LedgerError) return Effect.fail(settled)
          if (spendKeyId !== undefined) caps.close(capture.accountId, spendKeyId, capture.reference, capture.amount)
          limits.adjust(adjustments, now)
          if (completion === undefined) return Effect.succeed(settled)
          if (records !== undefined) {
            records.complete(completion.scope, completion.key, completion.response)
            return Effect.succeed(settled)
          }
          return Effect.as(idempotency.complete(completion.scope, completion.key, completion.response), settled)
        }),
      giveBack: ({ abandon, accountId, adjustments, now, reference, spendKeyId }) =>
        Effect.suspend(() => {
          ledger.release(accountId, reference, now)
          if (spendKeyId !== undefined) {
            // A deferred job may have captured the hold itself: that capture is what counts.
            const state = ledger.holdState(accountId, reference, now)
            caps.close(accountId, spendKeyId, reference, typeof state === "object" ? state.captured : 0)
          }
          limits.adjust(adjustments, now)
          if (abandon === undefined) return Effect.void
          if (records !== undefined) {
            records.abandon(abandon.scope, abandon.key)
            return Effect.void
          }
          return idempotency.abandon(abandon.scope, abandon.key)
        })
    })
  })
)
