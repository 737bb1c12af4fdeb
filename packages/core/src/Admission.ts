/**
 * The two store operations of a paid call. `admit` checks an API key's standing, takes every rate
 * limit and places the credit hold, all or nothing, in one step; `settle` captures the hold
 * (appending the usage entry), settles the rate-limit reservations and completes the
 * `Idempotency-Key` record, in one step; `giveBack` undoes an admission whose call failed. With
 * Redis each is one script call (`@tollgate/redis` `AdmissionStoreRedis`); in memory each is one
 * synchronous step over the memory stores' primitives.
 *
 * The rules stay with their services: which limits apply and what a 429 says (`RateLimiter.plan`),
 * what a key's standing means (`Auth`), how a hold splits between allowance and USD and what a
 * capture appends (the `CreditLedger` store's primitives, in memory and in the ledger's Lua). What
 * this module adds is the order of the checks: a key that does not stand refuses before anything
 * else, then a key the abuse guard has blocked (when the store can read the guard's blocks), then a
 * key's spend cap (`KeyCaps`); a hold the balance cannot cover refuses before a rate limit (a
 * payment is what a client can act on); whatever refuses, nothing is written.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import * as AbuseGuard from "./AbuseGuard.ts"
import * as AuthStore from "./AuthStore.ts"
import * as CreditLedger from "./CreditLedger.ts"
import type { RateLimited, ServiceUnavailable, Unauthenticated } from "./Errors.ts"
import * as IdempotencyStore from "./IdempotencyStore.ts"
import * as KeyCaps from "./KeyCaps.ts"
import type * as Money from "./Money.ts"
import type { Principal } from "./Principal.ts"
import * as RateLimiter from "./RateLimiter.ts"

/** @category models */
export interface AdmitInput {
  readonly now: number
  readonly accountId: string
  /** An API key whose standing (its account exists, it is not revoked) is checked first. */
  readonly keyId?: string | undefined
  /**
   * The abuse guard's block of that key (`AbuseGuard.blockKey`), read right after its standing by a
   * store that `readsAbuseBlocks`: a blocked key is refused before anything is taken.
   */
  readonly abuseBlockKey?: string | undefined
  /**
   * The API key whose spend cap (`KeyCaps`) the hold counts against, checked after its standing
   * and before the balance: a call the cap refuses takes nothing.
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
  | { readonly _tag: "KeyRefused"; readonly status: AuthStore.KeyStatus }
  | { readonly _tag: "Blocked"; readonly ms: number }
  | { readonly _tag: "CapReached"; readonly cap: KeyCaps.SpendCap; readonly spent: Money.Nano }
  | { readonly _tag: "HoldRefused"; readonly error: CreditLedger.LedgerError }
  | { readonly _tag: "RateLimited"; readonly states: ReadonlyArray<RateLimiter.CounterState> }

/**
 * An API key whose standing is left to the admission's store step, for a caller that did not
 * confirm it before (`Auth.Unconfirmed.pending`): the key the step reads (`AdmitInput.keyId`),
 * the abuse guard's block read with it by a store that `readsAbuseBlocks`
 * (`AdmitInput.abuseBlockKey`), and what the caller makes of what the step found.
 *
 * `refused` is the answer to a step that refused the key (`KeyRefused`: its 401; `Blocked`: the
 * guard's 429). `stands` follows a step that let the key through: the abuse guard names the
 * principal, and may refuse it, without asking its store when the step read the block. Nothing
 * may be granted to the key before `stands` succeeds, and it runs before any other refusal of the
 * step is answered, since a key's own refusal comes first.
 *
 * @category models
 */
export interface DeferredStanding {
  readonly keyId: string
  readonly abuseBlockKey: string | undefined
  readonly refused: (reply: Extract<AdmitReply, { readonly _tag: "KeyRefused" | "Blocked" }>) => Effect.Effect<never, Unauthenticated | RateLimited>
  readonly stands: Effect.Effect<void, Unauthenticated | RateLimited>
}

/** What the step found of a key it let through: its account exists and it is not revoked. */
const keyInGoodStanding: AuthStore.KeyStatus = { accountExists: true, revoked: false }

/**
 * The standing of `principal`'s key `keyId`, left to the admission's step. `verdict` is `Auth`'s
 * on a key's status (`Auth.Unconfirmed.pending.standing`): a refusal when the key does not stand,
 * else the abuse guard's naming of the principal. `abuseBlockKeyOf` is the guard's name for a
 * caller's block when the admission's store reads blocks, else `undefined`.
 *
 * @category constructors
 */
export const deferStanding = (
  principal: Principal,
  keyId: string,
  verdict: (status: AuthStore.KeyStatus) => Effect.Effect<void, Unauthenticated | RateLimited>,
  abuseBlockKeyOf: ((caller: string) => string) | undefined
): DeferredStanding => {
  const abuseBlockKey = abuseBlockKeyOf?.(AbuseGuard.principalCaller(principal))
  return {
    keyId,
    abuseBlockKey,
    // A refused key's verdict and a blocked caller's naming both fail.
    refused: (reply) =>
      (reply._tag === "KeyRefused" ? verdict(reply.status) : AbuseGuard.identifyRead(principal, reply.ms)) as Effect.Effect<
        never,
        Unauthenticated | RateLimited
      >,
    stands: abuseBlockKey === undefined ? verdict(keyInGoodStanding) : AbuseGuard.identifyRead(principal, 0)
  }
}

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
  /** Whether `admit` reads the abuse guard's block (`AdmitInput.abuseBlockKey`) in its step. */
  readonly readsAbuseBlocks: boolean
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
  AuthStore.Memory | KeyCaps.Memory | RateLimiter.StoreMemory | CreditLedger.Memory | IdempotencyStore.IdempotencyStore
> = Layer.effect(
  AdmissionStore,
  Effect.gen(function*() {
    const keys = yield* AuthStore.Memory
    const caps = yield* KeyCaps.Memory
    const limits = yield* RateLimiter.StoreMemory
    const ledger = yield* CreditLedger.Memory
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const records = Option.getOrUndefined(yield* Effect.serviceOption(IdempotencyStore.Memory))

    const admit = (input: AdmitInput): AdmitReply => {
      const { accountId, counters, now } = input
      if (input.keyId !== undefined) {
        const status = keys.keyStatus(accountId, input.keyId, now)
        if (!status.accountExists || status.revoked) return { _tag: "KeyRefused", status }
      }
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
        limits.adjust(counters.flatMap((counter) =>
          counter.amount === 0 ? [] : [{
            key: counter.key,
            field: counter.field,
            rolling: counter.rolling,
            bucket: Math.floor(now / counter.bucketMs),
            delta: -counter.amount
          }]
        ), now)
        return { _tag: "HoldRefused", error: held }
      }
      if (spendKeyId !== undefined) caps.reserve(accountId, spendKeyId, hold.reference, hold.amount, held.expiresAt)
      return { _tag: "Admitted", states: taken.states, hold: held }
    }

    return AdmissionStore.of({
      // The memory guard answers without I/O (`AbuseGuard.isKnownClear`): nothing to fold in.
      readsAbuseBlocks: false,
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

