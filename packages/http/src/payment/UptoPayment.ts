/**
 * The `upto` scheme paid per call: a Permit2 permit for at most the quote, verified before the
 * call, settled for what the call captured after it.
 *
 * **When to use**
 *
 * Through `PerCallPayment`, which routes a payment whose matched requirements name `upto` here;
 * they are offered only for a call whose charge is known from its outcome (chat, embeddings,
 * speech, transcription: `MeteredCall.settlesActual`).
 *
 * **Details**
 *
 * The permit is verified (signature, deadline, the payer's balance and Permit2 allowance,
 * simulated) before the call, and the call runs on a hold the permit funds
 * (`CreditLedger.FUNDED_HOLD_PREFIX`: it takes nothing from the wallet's credit, and the wallet's
 * other calls cannot spend it). The captured charge is settled on chain after the call, rounded up
 * to a USDC base unit, and the fraction rounded up is credited to the wallet. A call that fails
 * captures nothing and settles nothing, so the permit is left unused. A permit is claimed by its
 * `(payer, Permit2 nonce)` while its call runs, so a replay sent meanwhile is a 409, and once
 * settled Permit2 refuses its nonce, so a later replay is a 402. A streamed answer is settled when
 * its stream ends: its headers are gone by then, so it carries no `PAYMENT-RESPONSE`. If the
 * settlement fails after the call was served, the answer is withheld for a 402 naming the reason,
 * and its usage stays recorded: that is the operator's loss (docs/wallets.md).
 *
 * @since 0.1.0
 */
import { UptoEvmPayload, uptoReference } from "@tollgate/backends/payment/PaymentFacilitator"
import { Errors, Money, X402 } from "@tollgate/core"
import { Effect, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as ErrorResponse from "../ErrorResponse.ts"
import type { AcceptContext, Accepted, Ended, PaymentScheme, Services } from "./PaymentScheme.ts"
import { headers, releaseClaim, walletOf } from "./PaymentScheme.ts"

/**
 * The scope under which an `upto` permit is claimed while its call runs.
 *
 * @category constants
 */
export const UPTO_CLAIM_SCOPE = "x402-upto"

/** The permit's own reference, `(network, token, payer, Permit2 nonce)`. */
const uptoKey = (payment: X402.MatchedPayment) =>
  Schema.decodeUnknownEffect(UptoEvmPayload)(payment.payload.payload).pipe(
    Effect.map(({ permit2Authorization: { from, nonce } }) =>
      uptoReference(payment.requirements.network, payment.requirements.asset, from, nonce)
    ),
    Effect.mapError(() =>
      new X402.PaymentRejected({ reason: "invalid_upto_evm_payload", message: "The payload is not a Permit2 upto permit" })
    )
  )

/**
 * The `upto` scheme over the facilitator, ledger and idempotency store.
 *
 * @category constructors
 */
export const make = ({ facilitator, idempotency, ledger }: Services): PaymentScheme => {
  /** The permit, claimed for its call's run (a replay meanwhile is a 409) and verified. */
  const accept = (
    payment: X402.MatchedPayment,
    { refuse }: AcceptContext
  ): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> =>
    Effect.flatMap(
      uptoKey(payment),
      (key) =>
        Effect.flatMap(
          idempotency.claim(UPTO_CLAIM_SCOPE, key, key),
          (claim): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> =>
            claim._tag !== "Claimed"
              ? Effect.fail(new Errors.Conflict({ message: "This permit is already paying a call" }))
              : facilitator.verify(payment).pipe(
                Effect.map(({ payer }): Accepted => ({
                  _tag: "Accepted",
                  principal: walletOf(payment.requirements.network, payer),
                  fundsHold: true,
                  headers: {},
                  payment,
                  claim: { scope: UPTO_CLAIM_SCOPE, key },
                  refuse
                })),
                Effect.onError(() => Effect.ignore(idempotency.abandon(UPTO_CLAIM_SCOPE, key)))
              )
        )
    )

  const abandon = releaseClaim(idempotency)

  /**
   * The captured charge settled on chain, the fraction of a base unit rounded up credited to the
   * wallet; a call that captured nothing settles nothing. The permit's claim is released then:
   * once settled, Permit2 refuses its nonce.
   */
  const finish = (accepted: Accepted, ended: Ended): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
    const { payment, principal } = accepted
    const settled = (charge: Money.Nano) =>
      facilitator.settleActual(payment, charge).pipe(
        Effect.tap((settled) =>
          settled.amount > charge
            ? ledger.topUp({ accountId: principal.accountId, amount: Money.subtract(settled.amount, charge), reference: settled.reference })
              .pipe(
                Effect.catch((error) => Effect.logError("x402 upto rounding not credited", settled.reference, error.message))
              )
            : Effect.void
        ),
        Effect.map((settled): Record<string, string> => ({
          [X402.headers.paymentResponse]: X402.encodePaymentResponse({
            success: true,
            transaction: settled.transaction,
            network: settled.network,
            payer: settled.payer,
            amount: Money.toUsdcUnits(settled.amount)
          })
        })),
        Effect.tapError((error) =>
          Effect.logError("x402 upto call served but its charge not settled", principal.address, charge, error.message)
        )
      )
    const answered: Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> = ended._tag === "Failed"
      ? Effect.succeed(HttpServerResponse.setHeaders(ErrorResponse.render(ended.error), { [headers.credit]: "unsettled" }))
      : ended.charge === undefined
      ? Effect.succeed(ended.response)
      : settled(ended.charge).pipe(
        Effect.map((paid) => HttpServerResponse.setHeaders(ended.response, paid)),
        Effect.catchTag("PaymentRejected", (rejected) => accepted.refuse(rejected.reason))
      )
    return Effect.ensuring(answered, abandon(accepted))
  }

  return { accept, finish, abandon }
}
