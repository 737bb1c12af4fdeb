/**
 * What a per-call payment scheme (`exact`, `upto`, a `batch-settlement` voucher) gives
 * `PerCallPayment`, and the models the two steps share.
 *
 * **When to use**
 *
 * To add a scheme, write a module beside `ExactPayment.ts` that builds a `PaymentScheme` and route
 * its `scheme` name to it in `PerCallPayment`. A route never uses a scheme directly: the metered
 * pipeline takes payments through `PerCallPayment`.
 *
 * **Details**
 *
 * `accept` runs before the call's admission and answers who pays; `finish` runs after the call's
 * settlement and gives the answer; `abandon` frees what `accept` holds when the call ends without
 * an answer. A refusal is an `X402.PaymentRejected`, which `PerCallPayment` answers with the
 * endpoint's 402.
 *
 * @since 0.1.0
 */
import type { PaymentFacilitator } from "@tollgate/backends/payment/PaymentFacilitator"
import type { CreditLedger, Errors, IdempotencyStore, Money, PaymentChannels } from "@tollgate/core"
import { Principal, X402 } from "@tollgate/core"
import { Effect } from "effect"
import type { HttpServerResponse } from "effect/http"

/**
 * Answer headers of a settled payment: the USD credited by it, and, on an answer whose call failed,
 * that the payment stayed as credit (`kept`).
 *
 * @category constants
 */
export const headers = {
  credited: "x-payment-credited-usd",
  credit: "x-payment-credit"
} as const

/**
 * A payment accepted for one call, before the call's admission: the call runs as `principal`, and
 * `finish` closes the payment once the call is settled.
 *
 * @category models
 */
export interface Accepted {
  readonly _tag: "Accepted"
  /** The paying wallet, signed in: the call runs as it. */
  readonly principal: Principal.WalletPrincipal
  /**
   * The payment funds the call's hold (an `upto` permit): the hold's reference starts with
   * `CreditLedger.FUNDED_HOLD_PREFIX`, so it takes nothing of the wallet's credit, and `finish`
   * settles the captured charge on chain before the answer goes.
   */
  readonly fundsHold: boolean
  /** Headers every answer to the call carries (an `exact` payment's `PAYMENT-RESPONSE` and credit). */
  readonly headers: Readonly<Record<string, string>>
  readonly payment: X402.MatchedPayment
  /** The claim held while the call runs: the payment's `payment-identifier`, or the `upto` permit. */
  readonly claim: { readonly scope: string; readonly key: string } | undefined
  /**
   * A `batch-settlement` voucher: the channel as it was reserved for the call, and the deposit
   * transaction that opened or topped it up with this payment, if any.
   */
  readonly channel?: {
    readonly reserved: PaymentChannels.Channel
    readonly deposit: { readonly transaction: string; readonly amount: bigint } | undefined
  } | undefined
  /** Refuses the payment with the endpoint's 402 naming `reason`, its scheme's entries corrected. */
  readonly refuse: (reason: string, correction?: X402.Correction) => Effect.Effect<never, Errors.ApiError>
}

/**
 * A payment whose `payment-identifier` was answered before: its kept answer, sent again.
 *
 * @category models
 */
export interface Replayed {
  readonly _tag: "Replayed"
  readonly response: HttpServerResponse.HttpServerResponse
}

/**
 * How a paid call ended, told to `finish` after its settlement. `Served` carries the call's answer
 * and `charge`, what its settlement captured: `undefined` when it captured nothing or its hold
 * went to a job. A streamed answer is `Served` when its stream has ended (its settlement ran
 * then), and what `finish` returns for it is no longer sent.
 *
 * @category models
 */
export type Ended =
  | { readonly _tag: "Served"; readonly response: HttpServerResponse.HttpServerResponse; readonly charge: Money.Nano | undefined }
  | { readonly _tag: "Failed"; readonly error: Errors.ApiError }

/**
 * What `accept` is told besides the payment: the request's path (an `exact` payment's
 * `payment-identifier` is claimed for it) and how to refuse with the endpoint's 402.
 *
 * @category models
 */
export interface AcceptContext {
  readonly path: string
  readonly refuse: Accepted["refuse"]
}

/**
 * One scheme's two steps around a paid call.
 *
 * @category models
 */
export interface PaymentScheme {
  readonly accept: (
    payment: X402.MatchedPayment,
    context: AcceptContext
  ) => Effect.Effect<Accepted | Replayed, Errors.ApiError | X402.PaymentRejected>
  readonly finish: (accepted: Accepted, ended: Ended) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError>
  readonly abandon: (accepted: Accepted) => Effect.Effect<void>
}

/**
 * The services the `exact` and `upto` schemes take, resolved once by `PerCallPayment`'s layer.
 *
 * @category models
 */
export interface Services {
  readonly facilitator: PaymentFacilitator["Service"]
  readonly ledger: CreditLedger.CreditLedger["Service"]
  readonly idempotency: IdempotencyStore.IdempotencyStore["Service"]
}

/**
 * `abandon` of a scheme whose payment is held by a claim (`payment-identifier`, an `upto`
 * permit): the claim released.
 *
 * @category constructors
 */
export const releaseClaim = (idempotency: Services["idempotency"]) => ({ claim }: Accepted): Effect.Effect<void> =>
  claim === undefined ? Effect.void : Effect.ignore(idempotency.abandon(claim.scope, claim.key))

/**
 * The paying wallet of a settled or verified payment, as the principal its call runs as.
 *
 * @category constructors
 */
export const walletOf = (network: string, payer: string): Principal.WalletPrincipal => {
  const family = X402.familyOf(network)
  return new Principal.WalletPrincipal({ accountId: Principal.walletAccountId(family, payer), address: payer, family, chainId: network })
}
