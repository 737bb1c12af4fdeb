/**
 * A payment sent with a metered call pays for that call, the way x402 clients expect (the official
 * `wrapFetchWithPayment` re-sends the request with `PAYMENT-SIGNATURE` for an entry of its 402).
 *
 * **When to use**
 *
 * Provide `layer` with the server's services, and every paid route, and every endpoint declared on
 * top of `Metered.run`, honours such a payment; a route never calls it.
 *
 * **Details**
 *
 * The metered pipeline takes the payment in two steps. `accept` before the call's admission, in
 * place of authentication, matches the payment against the endpoint's requirements (the call at its
 * worst-case price, and the minimum top-up, see `X402.endpointRequirements`) and answers who pays
 * (and the headers every answer carries); `finish` after the call's settlement, told how the call
 * ended and what it captured, closes the payment and gives the answer. Neither wraps the call: the
 * pipeline runs it between them as any other call. This module only routes a matched payment to its
 * scheme: `exact` (`ExactPayment`, settled and credited before the call), `upto` (`UptoPayment`, a
 * permit settled for the captured charge after it) and `batch-settlement` (`VoucherPayment`, a
 * voucher committed on its channel). A refused payment is the endpoint's 402 naming the reason in
 * `error`.
 *
 * @since 0.1.0
 */
import { PaymentFacilitator } from "@tollgate/backends/payment/PaymentFacilitator"
import type { Errors, Money } from "@tollgate/core"
import { BatchSettlement, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import * as CreditLedger from "@tollgate/core/CreditLedger"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import { Context, Effect, Layer, Option, Result } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { CurrentRequest } from "../RequestContext.ts"
import * as ExactPayment from "./ExactPayment.ts"
import type { Accepted, Ended, PaymentScheme, Replayed } from "./PaymentScheme.ts"
import * as UptoPayment from "./UptoPayment.ts"
import * as VoucherPayment from "./VoucherPayment.ts"

export { PAYMENT_IDENTIFIER_MISMATCH } from "./ExactPayment.ts"
export { type Accepted, type Ended, headers, type Replayed } from "./PaymentScheme.ts"
export { UPTO_CLAIM_SCOPE } from "./UptoPayment.ts"

/**
 * The largest body a caller without credentials may send to be priced: the 402 of a call whose
 * price depends on its body (a chat's model and `max_tokens`) can then offer the call itself.
 * Larger bodies get the discovery 402 before they are read, with the top-up only.
 *
 * @category constants
 */
export const PRICED_BODY_MAX_BYTES = 64 * 1024

/** @category models */
export interface AcceptInput {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The call's worst-case price: the amount of its per-call entries. */
  readonly price: Money.Nano
  /** The charge is known from the outcome (`MeteredCall.settlesActual`): `upto` is accepted too. */
  readonly settlesActual?: boolean | undefined
}

/**
 * Per-call payments as two steps around the metered pipeline: `accept` before the call's
 * admission, `finish` after its settlement (and `abandon` for a call that ends without an answer).
 *
 * @category services
 */
export class PerCallPayment extends Context.Service<PerCallPayment, {
  /** Whether the request carries a payment this server can take. */
  readonly carries: (headers: Readonly<Record<string, string | undefined>>) => boolean
  /** Whether a request without credentials is small enough to be read and priced for its 402. */
  readonly pricesAnonymous: (headers: Readonly<Record<string, string | undefined>>) => boolean
  /**
   * Matches, claims and verifies the payment; an `exact` payment is settled and credited to the
   * paying wallet too. A refused payment is the endpoint's 402 with the reason in `error`, and
   * nothing is settled, credited or left claimed.
   */
  readonly accept: (input: AcceptInput) => Effect.Effect<Accepted | Replayed, Errors.ApiError>
  /**
   * The answer to an accepted payment's call, once the call is settled: an `upto` permit's
   * captured charge settled on chain (a refused settlement withholds the answer for a 402), the
   * payment's headers set, a failed call's error answered as one whose payment stayed as credit,
   * and the claim completed with the answer or released.
   */
  readonly finish: (accepted: Accepted, ended: Ended) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError>
  /** Releases the claim of an accepted payment whose call ended without an answer (interrupted). */
  readonly abandon: (accepted: Accepted) => Effect.Effect<void>
}>()("@tollgate/http/PerCallPayment") {}

/**
 * Per-call payments over the configured facilitator and ledger; a server without `payTo` takes
 * none (the payment header is then ignored, as before).
 *
 * @category layers
 */
export const layer: Layer.Layer<
  PerCallPayment,
  never,
  X402.X402Config | PaymentFacilitator | CreditLedger.CreditLedger | Auth | IdempotencyStore.IdempotencyStore
> = Layer.effect(
  PerCallPayment,
  Effect.gen(function*() {
    const config = yield* X402.X402Config
    const auth = yield* Auth
    const enabled = X402.paymentsEnabled(config)
    const services = {
      facilitator: yield* PaymentFacilitator,
      ledger: yield* CreditLedger.CreditLedger,
      idempotency: yield* IdempotencyStore.IdempotencyStore
    }
    const exact = ExactPayment.make(services)
    const upto = UptoPayment.make(services)
    const voucher = yield* VoucherPayment.make
    const schemeOf = (payment: X402.MatchedPayment): PaymentScheme =>
      payment.requirements.scheme === "upto"
        ? upto
        : payment.requirements.scheme === BatchSettlement.SCHEME
        ? voucher
        : exact

    const accept = ({ price, request, settlesActual }: AcceptInput): Effect.Effect<Accepted | Replayed, Errors.ApiError> => {
      const path = new URL(request.url, config.publicOrigin).pathname
      const resource = { url: `${config.publicOrigin}${path}` }
      const refuse = (error: string, correction?: X402.Correction) =>
        Effect.flatMap(Effect.zip(auth.siwxChallenge, CurrentRequest), ([challenge, current]) =>
          Effect.fail(
            X402.discovery(config, {
              resource,
              challenge,
              price,
              settlesActual: settlesActual === true,
              bazaar: current.bazaar,
              error,
              correction
            })
          ))
      const header = Option.getOrElse(X402.paymentHeader(request.headers), () => "")
      const decoded = X402.decodePayment(header, X402.endpointRequirements(config, price, settlesActual === true))
      const taken = Result.isFailure(decoded)
        ? Effect.fail(decoded.failure)
        : schemeOf(decoded.success).accept(decoded.success, { path, refuse })
      return Effect.catchTag(
        taken,
        "PaymentRejected",
        (rejected) =>
          Effect.logInfo("x402 per-call payment refused", rejected.reason, rejected.message).pipe(
            Effect.andThen(refuse(rejected.reason, rejected.correction))
          )
      )
    }

    return PerCallPayment.of({
      carries: (requestHeaders) => enabled && Option.isSome(X402.paymentHeader(requestHeaders)),
      pricesAnonymous: (requestHeaders) =>
        enabled && requestHeaders["transfer-encoding"] === undefined &&
        Number(requestHeaders["content-length"] ?? 0) <= PRICED_BODY_MAX_BYTES,
      accept,
      finish: (accepted, ended) => schemeOf(accepted.payment).finish(accepted, ended),
      abandon: (accepted) => schemeOf(accepted.payment).abandon(accepted)
    })
  })
)
