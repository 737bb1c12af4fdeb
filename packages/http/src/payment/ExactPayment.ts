/**
 * The `exact` scheme paid per call: the payment is verified, settled and credited to the paying
 * wallet before the call runs, and the call runs on the wallet's credit.
 *
 * **When to use**
 *
 * Through `PerCallPayment`, which routes a payment whose matched requirements name `exact` here.
 *
 * **Details**
 *
 * Settling first means no base unit can go missing: every unit that moved is on the ledger before
 * anything is served, a replay is refused by the facilitator and credits nothing twice, and a call
 * that fails or is cut off leaves the whole payment as credit. A payment that names itself with the
 * `payment-identifier` extension is answered once: a retry with the same id, signed by the same
 * payer, gets the kept answer.
 *
 * @since 0.1.0
 */
import * as PaymentSigner from "@tollgate/backends/payment/PaymentSigner"
import { Errors, Money, X402 } from "@tollgate/core"
import { Effect, Option } from "effect"
import { HttpServerResponse } from "effect/http"
import * as ErrorResponse from "../ErrorResponse.ts"
import * as StoredResponse from "../StoredResponse.ts"
import type { AcceptContext, Accepted, Ended, PaymentScheme, Replayed, Services } from "./PaymentScheme.ts"
import { headers, releaseClaim, walletOf } from "./PaymentScheme.ts"

/**
 * The refusal reason (the 402's `error`) of a payment whose `payment-identifier` was first used by
 * another signer or for other terms.
 *
 * @category constants
 */
export const PAYMENT_IDENTIFIER_MISMATCH = "payment_identifier_mismatch"

/**
 * The `exact` scheme over the facilitator, ledger and idempotency store.
 *
 * @category constructors
 */
export const make = ({ facilitator, idempotency, ledger }: Services): PaymentScheme => {
  /** Verifies, settles and credits the payment: the call then runs on the wallet's credit. */
  const settleAndCredit = (
    payment: X402.MatchedPayment,
    claim: Accepted["claim"],
    refuse: Accepted["refuse"]
  ): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> =>
    facilitator.verify(payment).pipe(
      Effect.andThen(facilitator.settle(payment)),
      Effect.flatMap((settled) => {
        const principal = walletOf(settled.network, settled.payer)
        const credited = ledger.topUp({ accountId: principal.accountId, amount: settled.amount, reference: settled.reference }).pipe(
          Effect.catchTag("LedgerError", (error) =>
            Effect.logError("x402 per-call payment settled but not credited", settled.reference, error.message).pipe(
              Effect.andThen(Effect.fail(new Errors.ServiceUnavailable({ message: "The payment settled but could not be credited yet" })))
            ))
        )
        const paid: Record<string, string> = {
          [X402.headers.paymentResponse]: X402.encodePaymentResponse({
            success: true,
            transaction: settled.transaction,
            network: settled.network,
            payer: settled.payer
          }),
          [headers.credited]: Money.formatUsd(settled.amount)
        }
        return Effect.as(credited, { _tag: "Accepted", principal, fundsHold: false, headers: paid, payment, claim, refuse } as const)
      })
    )

  /**
   * A payment naming itself (`payment-identifier`) is claimed by its id before it is verified: a
   * retry with the same id, the same payment re-sent (whose authorization is spent by then) or
   * one signed anew, gets the first attempt's answer and moves nothing. The id travels outside
   * the signed part of a payment, so it is no secret: the claim also holds who signed the payment
   * (`PaymentSigner`, from the signature, offline), and a payment with the same id from anyone
   * else, or for other terms, is refused like any other refused payment and moves nothing. A
   * streamed answer cannot be kept, so its id stays claimed until the lease ends.
   */
  const accept = (
    payment: X402.MatchedPayment,
    { path, refuse }: AcceptContext
  ): Effect.Effect<Accepted | Replayed, Errors.ApiError | X402.PaymentRejected> => {
    const id = X402.paymentIdentifier(payment.payload)
    if (Option.isNone(id)) return settleAndCredit(payment, undefined, refuse)
    const { amount, network, payTo, scheme } = payment.requirements
    const claimed = Effect.flatMap(
      PaymentSigner.signerOf(payment),
      (signer) => idempotency.claim(X402.PAYMENT_IDENTIFIER, id.value, `${path} ${scheme} ${network} ${amount} ${payTo} ${signer}`)
    )
    return Effect.flatMap(claimed, (claim): Effect.Effect<Accepted | Replayed, Errors.ApiError | X402.PaymentRejected> => {
      switch (claim._tag) {
        case "Replay":
          return Effect.succeed({ _tag: "Replayed", response: StoredResponse.replayed(claim.response) })
        case "InFlight":
          return Effect.fail(new Errors.Conflict({ message: "A payment with this payment-identifier is still being processed" }))
        case "Mismatch":
          return Effect.fail(
            new X402.PaymentRejected({
              reason: PAYMENT_IDENTIFIER_MISMATCH,
              message: "This payment-identifier was used by another payer or for another payment"
            })
          )
        case "Claimed":
          return settleAndCredit(payment, { scope: X402.PAYMENT_IDENTIFIER, key: id.value }, refuse).pipe(
            Effect.onError(() => Effect.ignore(idempotency.abandon(X402.PAYMENT_IDENTIFIER, id.value)))
          )
      }
    })
  }

  const abandon = releaseClaim(idempotency)

  /**
   * The call's answer, or its error's, saying the payment stayed as credit (`headers.credit`),
   * kept for the `payment-identifier` when it is whole (not a stream).
   */
  const finish = (accepted: Accepted, ended: Ended): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
    const response = ended._tag === "Served"
      ? ended.response
      : HttpServerResponse.setHeaders(ErrorResponse.render(ended.error), { ...accepted.headers, [headers.credit]: "kept" })
    const { claim } = accepted
    if (claim === undefined || response.body._tag !== "Uint8Array") return Effect.succeed(response)
    return Effect.as(idempotency.complete(claim.scope, claim.key, StoredResponse.toStored(response)), response)
  }

  return { accept, finish, abandon }
}
