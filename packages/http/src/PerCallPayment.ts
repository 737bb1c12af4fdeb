/**
 * A payment sent with a metered call pays for that call, the way x402 clients expect (the official
 * `wrapFetchWithPayment` re-sends the request with `PAYMENT-SIGNATURE` for an entry of its 402).
 * The metered pipeline hands such a request here before it authenticates, so every paid route, and
 * every endpoint declared on top of `Metered.run`, honours it.
 *
 * The payment is matched against the endpoint's requirements (the call at its worst-case price, and
 * the minimum top-up, see `X402.endpointRequirements`), verified and settled by the
 * `PaymentFacilitator` like a top-up, and credited to the paying wallet under the payment's own
 * reference. Only then does the call run, as that wallet signed in: its hold and capture take the
 * credit like any SIWX call, and what the call does not use stays on the wallet. Settling first
 * means no base unit can go missing: every unit that moved is on the ledger before anything is
 * served, a replay is refused by the facilitator (a used authorization, a landed transaction) and
 * credits nothing twice, and a call that fails or is cut off leaves the whole payment as credit.
 * Every answer to a settled payment carries `PAYMENT-RESPONSE` and `X-Payment-Credited-Usd`; a
 * failed call's error answer says in `X-Payment-Credit` that the payment stayed as credit. A
 * payment that names itself with the `payment-identifier` extension is answered once: a retry
 * with the same id, signed by the same payer, gets the kept answer.
 *
 * A call whose charge is known only from its outcome (chat, embeddings, speech, transcription:
 * `MeteredCall.settlesActual`) may instead be paid with `upto`, a Permit2 permit for at most the
 * quote. That permit is verified (signature, deadline, the payer's balance and Permit2 allowance,
 * simulated) before the call, the call runs on a hold the permit funds (`CreditLedger`'s
 * `FUNDED_HOLD_PREFIX`: it takes nothing from the wallet's credit, and the wallet's other calls
 * cannot spend it), and the actual charge it captured is settled on chain after it, rounded up to a
 * USDC base unit; the fraction of a unit rounded up is credited to the wallet. A call that fails
 * captures nothing and settles nothing, so the payer pays nothing and the permit is left unused.
 * A permit is claimed by its `(payer, Permit2 nonce)` while its call runs, so a replay sent
 * meanwhile is a 409, and once settled Permit2 refuses its nonce, so a later replay is a 402.
 * A streamed answer is settled when its stream ends: its headers are gone by then, so it carries
 * no `PAYMENT-RESPONSE`. If the settlement fails after the call was served (the payer revoked
 * Permit2's allowance or moved the balance meanwhile), the call's answer is withheld for a 402
 * naming the reason, and its usage stays recorded: that is the operator's loss (docs/wallets.md).
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, Principal, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import { PaymentFacilitator, UptoEvmPayload, uptoReference } from "@tollgate/backends/PaymentFacilitator"
import * as PaymentSigner from "@tollgate/backends/PaymentSigner"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpServerResponse } from "effect/http"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as StoredResponse from "./StoredResponse.ts"
import { CurrentRequest } from "./RequestContext.ts"

/**
 * The largest body a caller without credentials may send to be priced: the 402 of a call whose
 * price depends on its body (a chat's model and `max_tokens`) can then offer the call itself.
 * Larger bodies get the discovery 402 before they are read, with the top-up only.
 *
 * @category constants
 */
export const PRICED_BODY_MAX_BYTES = 64 * 1024

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
 * An `upto` permit paying a call: the call holds under a reference the permit funds
 * (`CreditLedger.FUNDED_HOLD_PREFIX`) and records here what it captured.
 *
 * @category models
 */
export interface Funding {
  charged: Money.Nano | undefined
}

/**
 * The refusal reason (the 402's `error`) of a payment whose `payment-identifier` was first used by
 * another signer or for other terms.
 *
 * @category constants
 */
export const PAYMENT_IDENTIFIER_MISMATCH = "payment_identifier_mismatch"

/** @category models */
export interface PayInput {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The call's worst-case price: the amount of its per-call entries. */
  readonly price: Money.Nano
  /** The charge is known from the outcome (`MeteredCall.settlesActual`): `upto` is accepted too. */
  readonly settlesActual?: boolean | undefined
  /** Runs the call as the paying wallet, signed in; with `funding`, on a hold the permit funds. */
  readonly serve: (
    principal: Principal.WalletPrincipal,
    funding?: Funding
  ) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError>
}

/** The permit's own reference, `(network, token, payer, Permit2 nonce)`. */
const uptoKey = (payment: X402.MatchedPayment) =>
  Schema.decodeUnknownEffect(UptoEvmPayload)(payment.payload.payload).pipe(
    Effect.map(({ permit2Authorization: { from, nonce } }) =>
      uptoReference(payment.requirements.network, payment.requirements.asset, from, nonce)
    ),
    Effect.mapError(() => new X402.PaymentRejected({ reason: "invalid_upto_evm_payload", message: "The payload is not a Permit2 upto permit" }))
  )

/**
 * The scope under which an `upto` permit is claimed while its call runs.
 *
 * @category constants
 */
export const UPTO_CLAIM_SCOPE = "x402-upto"

/** @category services */
export class PerCallPayment extends Context.Service<PerCallPayment, {
  /** Whether the request carries a payment this server can take. */
  readonly carries: (headers: Readonly<Record<string, string | undefined>>) => boolean
  /** Whether a request without credentials is small enough to be read and priced for its 402. */
  readonly pricesAnonymous: (headers: Readonly<Record<string, string | undefined>>) => boolean
  /**
   * Settles and credits the payment, then serves the call. A refused payment is the endpoint's
   * 402 with the reason in `error`, nothing settled or credited.
   */
  readonly pay: (input: PayInput) => Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError>
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
    const facilitator = yield* PaymentFacilitator
    const ledger = yield* CreditLedger.CreditLedger
    const auth = yield* Auth
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const enabled = X402.paymentsEnabled(config)

    /** Verifies, settles and credits the payment, then serves the call as the payer. */
    const settleAndServe = (
      payment: X402.MatchedPayment,
      serve: PayInput["serve"]
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError | X402.PaymentRejected> =>
      facilitator.verify(payment).pipe(
        Effect.andThen(facilitator.settle(payment)),
        Effect.flatMap((settled) => {
          const family = X402.familyOf(settled.network)
          const accountId = Principal.walletAccountId(family, settled.payer)
          const credited = ledger.topUp({ accountId, amount: settled.amount, reference: settled.reference }).pipe(
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
          const principal = new Principal.WalletPrincipal({ accountId, address: settled.payer, family, chainId: settled.network })
          return Effect.andThen(
            credited,
            serve(principal).pipe(
              Effect.map((response) => HttpServerResponse.setHeaders(response, paid)),
              // The payment is on the wallet's credit whatever the call did: the answer says so.
              Effect.catch((error) =>
                Effect.succeed(HttpServerResponse.setHeaders(ErrorResponse.render(error), { ...paid, [headers.credit]: "kept" })))
            )
          )
        })
      )

    /**
     * A payment naming itself (`payment-identifier`) is claimed by its id before it is verified:
     * a retry with the same id, the same payment re-sent (whose authorization is spent by then) or
     * one signed anew, gets the first attempt's answer and moves nothing. The id travels outside
     * the signed part of a payment, so it is no secret: the claim also holds who signed the
     * payment (`PaymentSigner`, from the signature, offline), and a payment with the same id from
     * anyone else, or for other terms, is refused like any other refused payment and moves nothing.
     * A streamed answer cannot be kept, so its id stays claimed until the lease ends.
     */
    const once = (
      payment: X402.MatchedPayment,
      path: string,
      serve: PayInput["serve"]
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError | X402.PaymentRejected> => {
      const id = X402.paymentIdentifier(payment.payload)
      if (Option.isNone(id)) return settleAndServe(payment, serve)
      const { amount, network, payTo, scheme } = payment.requirements
      const claimed = Effect.flatMap(
        PaymentSigner.signerOf(payment),
        (signer) => idempotency.claim(X402.PAYMENT_IDENTIFIER, id.value, `${path} ${scheme} ${network} ${amount} ${payTo} ${signer}`)
      )
      return Effect.flatMap(claimed, (claim) => {
        switch (claim._tag) {
          case "Replay":
            return Effect.succeed(StoredResponse.replayed(claim.response))
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
            return settleAndServe(payment, serve).pipe(
              Effect.onError(() => Effect.ignore(idempotency.abandon(X402.PAYMENT_IDENTIFIER, id.value))),
              Effect.tap((response) =>
                response.body._tag === "Uint8Array"
                  ? idempotency.complete(X402.PAYMENT_IDENTIFIER, id.value, StoredResponse.toStored(response))
                  : Effect.void
              )
            )
        }
      })
    }

    /**
     * An `upto` permit: verified, the call served on the hold it funds, then what the call captured
     * settled on chain. The permit is claimed for the call's run (see the module doc).
     */
    const serveThenSettle = (
      payment: X402.MatchedPayment,
      serve: PayInput["serve"],
      refuse: (error: string) => Effect.Effect<never, Errors.ApiError>,
      unclaim: Effect.Effect<void>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError | X402.PaymentRejected> =>
      Effect.gen(function*() {
        const { payer } = yield* facilitator.verify(payment)
        const family = X402.familyOf(payment.requirements.network)
        const accountId = Principal.walletAccountId(family, payer)
        const principal = new Principal.WalletPrincipal({ accountId, address: payer, family, chainId: payment.requirements.network })
        const funding: Funding = { charged: undefined }
        // Settles what the call captured; the fraction of a base unit rounded up is credited.
        const settleCharge = Effect.suspend(() => {
          const charged = funding.charged
          if (charged === undefined) return Effect.succeed(Option.none<Record<string, string>>())
          return facilitator.settleActual(payment, charged).pipe(
            Effect.tap((settled) =>
              settled.amount > charged
                ? ledger.topUp({ accountId, amount: Money.subtract(settled.amount, charged), reference: settled.reference }).pipe(
                  Effect.catch((error) => Effect.logError("x402 upto rounding not credited", settled.reference, error.message))
                )
                : Effect.void
            ),
            Effect.map((settled) =>
              Option.some({
                [X402.headers.paymentResponse]: X402.encodePaymentResponse({
                  success: true,
                  transaction: settled.transaction,
                  network: settled.network,
                  payer: settled.payer,
                  amount: Money.toUsdcUnits(settled.amount)
                })
              })
            ),
            Effect.tapError((error) => Effect.logError("x402 upto call served but its charge not settled", payer, charged, error.message))
          )
        })
        const response = yield* serve(principal, funding).pipe(
          Effect.catch((error) =>
            Effect.map(
              Effect.orElseSucceed(settleCharge, () => Option.none()),
              (paid) =>
                HttpServerResponse.setHeaders(ErrorResponse.render(error), Option.getOrElse(paid, () => ({ [headers.credit]: "unsettled" })))
            )
          )
        )
        if (response.body._tag === "Stream") {
          const body = response.body
          return HttpServerResponse.stream(
            // The permit stays claimed until its charge is settled, after the stream's last byte.
            Stream.ensuring(body.stream, Effect.ensuring(Effect.ignore(settleCharge), unclaim)),
            { status: response.status, headers: response.headers, contentType: body.contentType }
          )
        }
        if (funding.charged === undefined) return response
        return yield* settleCharge.pipe(
          Effect.map((paid) => HttpServerResponse.setHeaders(response, Option.getOrElse(paid, () => ({})))),
          Effect.catchTag("PaymentRejected", (rejected) => refuse(rejected.reason))
        )
      })

    /** Claims an `upto` permit for its call's run: a replay meanwhile is a 409. */
    const uptoOnce = (
      payment: X402.MatchedPayment,
      serve: PayInput["serve"],
      refuse: (error: string) => Effect.Effect<never, Errors.ApiError>
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError | X402.PaymentRejected> =>
      Effect.flatMap(uptoKey(payment), (key) =>
        Effect.flatMap(idempotency.claim(UPTO_CLAIM_SCOPE, key, key), (claim) =>
          claim._tag !== "Claimed"
            ? Effect.fail(new Errors.Conflict({ message: "This permit is already paying a call" }))
            : Effect.suspend(() => {
              const unclaim = Effect.ignore(idempotency.abandon(UPTO_CLAIM_SCOPE, key))
              return serveThenSettle(payment, serve, refuse, unclaim).pipe(
                Effect.onExit((exit) => exit._tag === "Success" && exit.value.body._tag === "Stream" ? Effect.void : unclaim)
              )
            })))

    const pay = ({ price, request, serve, settlesActual }: PayInput): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
      const path = new URL(request.url, config.publicOrigin).pathname
      const resource = { url: `${config.publicOrigin}${path}` }
      const refuse = (error: string) =>
        Effect.flatMap(Effect.zip(auth.siwxChallenge, CurrentRequest), ([challenge, current]) =>
          Effect.fail(X402.discovery(config, { resource, challenge, price, settlesActual: settlesActual === true, bazaar: current.bazaar, error })))
      const header = Option.getOrElse(X402.paymentHeader(request.headers), () => "")
      return X402.decodePayment(header, X402.endpointRequirements(config, price, settlesActual === true)).pipe(
        Effect.flatMap((payment) => payment.requirements.scheme === "upto" ? uptoOnce(payment, serve, refuse) : once(payment, path, serve)),
        Effect.catchTag("PaymentRejected", (rejected) =>
          Effect.logInfo("x402 per-call payment refused", rejected.reason, rejected.message).pipe(Effect.andThen(refuse(rejected.reason))))
      )
    }

    return PerCallPayment.of({
      carries: (requestHeaders) => enabled && Option.isSome(X402.paymentHeader(requestHeaders)),
      pricesAnonymous: (requestHeaders) =>
        enabled && requestHeaders["transfer-encoding"] === undefined &&
        Number(requestHeaders["content-length"] ?? 0) <= PRICED_BODY_MAX_BYTES,
      pay
    })
  })
)
