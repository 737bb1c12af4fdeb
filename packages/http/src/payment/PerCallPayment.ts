/**
 * A payment sent with a metered call pays for that call, the way x402 clients expect (the official
 * `wrapFetchWithPayment` re-sends the request with `PAYMENT-SIGNATURE` for an entry of its 402).
 * The metered pipeline takes such a payment in two steps, so every paid route, and every endpoint
 * declared on top of `Metered.run`, honours it: `accept` before the call's admission, in place of
 * authentication, answers who pays (and the headers every answer carries); `finish` after the
 * call's settlement, told how the call ended and what it captured, closes the payment and gives
 * the answer. Neither wraps the call: the pipeline runs it between them as any other call.
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
import { BatchSettlement, CreditLedger, Errors, Money, PaymentChannels, Principal, X402 } from "@tollgate/core"
import { Auth } from "@tollgate/core/Auth"
import * as IdempotencyStore from "@tollgate/core/IdempotencyStore"
import { ChannelChain } from "@tollgate/backends/ChannelChain"
import { PaymentFacilitator, UptoEvmPayload, uptoReference } from "@tollgate/backends/payment/PaymentFacilitator"
import * as PaymentSigner from "@tollgate/backends/payment/PaymentSigner"
import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import type { HttpServerRequest } from "effect/http"
import { HttpServerResponse } from "effect/http"
import * as ErrorResponse from "../ErrorResponse.ts"
import * as StoredResponse from "../StoredResponse.ts"
import { CurrentRequest } from "../RequestContext.ts"

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
 * The refusal reason (the 402's `error`) of a payment whose `payment-identifier` was first used by
 * another signer or for other terms.
 *
 * @category constants
 */
export const PAYMENT_IDENTIFIER_MISMATCH = "payment_identifier_mismatch"

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


/** @category models */
export interface AcceptInput {
  readonly request: HttpServerRequest.HttpServerRequest
  /** The call's worst-case price: the amount of its per-call entries. */
  readonly price: Money.Nano
  /** The charge is known from the outcome (`MeteredCall.settlesActual`): `upto` is accepted too. */
  readonly settlesActual?: boolean | undefined
}

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
  readonly channel?: { readonly reserved: PaymentChannels.Channel; readonly deposit: { readonly transaction: string; readonly amount: bigint } | undefined } | undefined
  /** Refuses the payment with the endpoint's 402 naming `reason`. */
  readonly refuse: (reason: string) => Effect.Effect<never, Errors.ApiError>
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
    const facilitator = yield* PaymentFacilitator
    const ledger = yield* CreditLedger.CreditLedger
    const auth = yield* Auth
    const idempotency = yield* IdempotencyStore.IdempotencyStore
    const enabled = X402.paymentsEnabled(config)
    // Present where `batch-settlement` is offered (`X402.EvmOption.batchSettlement`).
    const channels = Option.getOrUndefined(yield* Effect.serviceOption(PaymentChannels.PaymentChannels))
    const chain = Option.getOrUndefined(yield* Effect.serviceOption(ChannelChain))

    const walletOf = (network: string, payer: string) => {
      const family = X402.familyOf(network)
      return new Principal.WalletPrincipal({ accountId: Principal.walletAccountId(family, payer), address: payer, family, chainId: network })
    }

    /** Verifies, settles and credits an `exact` payment: the call then runs on the wallet's credit. */
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
     * An `exact` payment naming itself (`payment-identifier`) is claimed by its id before it is
     * verified: a retry with the same id, the same payment re-sent (whose authorization is spent
     * by then) or one signed anew, gets the first attempt's answer and moves nothing. The id
     * travels outside the signed part of a payment, so it is no secret: the claim also holds who
     * signed the payment (`PaymentSigner`, from the signature, offline), and a payment with the
     * same id from anyone else, or for other terms, is refused like any other refused payment and
     * moves nothing. A streamed answer cannot be kept, so its id stays claimed until the lease ends.
     */
    const acceptExact = (
      payment: X402.MatchedPayment,
      path: string,
      refuse: Accepted["refuse"]
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

    /**
     * An `upto` permit, claimed for its call's run (a replay meanwhile is a 409) and verified: the
     * call runs on the hold it funds, and `finish` settles what the call captured.
     */
    const acceptUpto = (
      payment: X402.MatchedPayment,
      refuse: Accepted["refuse"]
    ): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> =>
      Effect.flatMap(uptoKey(payment), (key) =>
        Effect.flatMap(idempotency.claim(UPTO_CLAIM_SCOPE, key, key), (claim): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> =>
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
            )))

    /**
     * A `batch-settlement` voucher, checked offline (`BatchSettlement.check`), then reserved on its
     * channel: stored, and the channel held, before the call runs. A deposit with it is submitted
     * first, and opens or tops up the channel; a voucher on a channel this server has not seen yet
     * (the store refuses it as missing) reads the channel's escrow from the chain once, and is
     * reserved again. A voucher on a known channel thus takes one step of the store.
     */
    const acceptVoucher = (
      payment: X402.MatchedPayment,
      refuse: Accepted["refuse"]
    ): Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected> => {
      const offer = config.evm?.batchSettlement
      if (offer === undefined || channels === undefined || chain === undefined) {
        return Effect.fail(new X402.PaymentRejected({ reason: "unsupported_scheme", message: "batch-settlement is not settled here" }))
      }
      const checked = BatchSettlement.check(payment.requirements, offer.minimumWithdrawDelaySeconds, payment.payload.payload)
      if (Result.isFailure(checked)) {
        return Effect.fail(new X402.PaymentRejected({ reason: checked.failure.reason, message: checked.failure.message }))
      }
      const voucher = checked.success
      const now = Date.now()
      const reserve = channels.reserve({
        channelId: voucher.channelId,
        maxClaimable: voucher.maxClaimable,
        signature: voucher.signature,
        price: BigInt(payment.requirements.amount),
        exposureCap: offer.exposureCap,
        now,
        leaseMs: BatchSettlement.RESERVATION_LEASE_MS
      })
      const accepted = (reserved: PaymentChannels.Channel, deposit: NonNullable<Accepted["channel"]>["deposit"]): Accepted => ({
        _tag: "Accepted",
        principal: walletOf(payment.requirements.network, voucher.payer),
        fundsHold: true,
        headers: {},
        payment,
        claim: undefined,
        refuse,
        channel: { reserved, deposit }
      })
      type Reserving = Effect.Effect<PaymentChannels.Channel, Errors.ApiError | X402.PaymentRejected | PaymentChannels.VoucherRefused>
      const missing = (): Reserving =>
        Effect.flatMap(chain.read(voucher.channelId), (onChain): Reserving =>
          onChain.balance === 0n
            ? Effect.fail(new X402.PaymentRejected({ reason: "invalid_batch_settlement_evm_channel_not_found", message: "The channel holds no deposit" }))
            : Effect.andThen(channels.open(voucher.channelId, voucher.config, onChain, now), reserve))
      const reserved: Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected | PaymentChannels.VoucherRefused> =
        voucher.deposit !== undefined
          ? Effect.flatMap(chain.deposit(payment), (deposited) =>
            channels.open(voucher.channelId, voucher.config, deposited.onChain, now).pipe(
              Effect.andThen(reserve),
              Effect.map((channel) => accepted(channel, { transaction: deposited.transaction, amount: voucher.deposit! }))
            ))
          : reserve.pipe(
            Effect.catchTag("VoucherRefused", (refused): Reserving =>
              refused.reason !== "invalid_batch_settlement_evm_missing_channel"
                ? Effect.fail(refused)
                : missing()),
            Effect.map((channel) => accepted(channel, undefined))
          )
      return Effect.catchTag(reserved, "VoucherRefused", (refused) =>
        Effect.fail(new X402.PaymentRejected({ reason: refused.reason, message: `The voucher was refused (${refused.reason})` })))
    }

    const accept = ({ price, request, settlesActual }: AcceptInput): Effect.Effect<Accepted | Replayed, Errors.ApiError> => {
      const path = new URL(request.url, config.publicOrigin).pathname
      const refuse = (error: string) =>
        Effect.flatMap(Effect.zip(auth.siwxChallenge, CurrentRequest), ([challenge, current]) =>
          Effect.fail(X402.discovery(config, {
            resource: { url: `${config.publicOrigin}${path}` },
            challenge,
            price,
            settlesActual: settlesActual === true,
            bazaar: current.bazaar,
            error
          })))
      const header = Option.getOrElse(X402.paymentHeader(request.headers), () => "")
      const decoded = X402.decodePayment(header, X402.endpointRequirements(config, price, settlesActual === true))
      const taken: Effect.Effect<Accepted | Replayed, Errors.ApiError | X402.PaymentRejected> = Result.isFailure(decoded)
        ? Effect.fail(decoded.failure)
        : decoded.success.requirements.scheme === "upto"
        ? acceptUpto(decoded.success, refuse)
        : decoded.success.requirements.scheme === BatchSettlement.SCHEME
        ? acceptVoucher(decoded.success, refuse)
        : acceptExact(decoded.success, path, refuse)
      return Effect.catchTag(taken, "PaymentRejected", (rejected) =>
        Effect.logInfo("x402 per-call payment refused", rejected.reason, rejected.message).pipe(Effect.andThen(refuse(rejected.reason))))
    }

    const abandon = ({ channel, claim }: Accepted): Effect.Effect<void> =>
      channel !== undefined && channels !== undefined
        ? Effect.ignore(channels.release(channel.reserved.channelId))
        : claim === undefined
        ? Effect.void
        : Effect.ignore(idempotency.abandon(claim.scope, claim.key))

    /**
     * A voucher's answer: the call's charge added to its channel (the call was served, its voucher
     * is stored already), with the charge and the channel in `PAYMENT-RESPONSE`; a call that failed
     * charges nothing and frees the channel, and the same voucher may be sent again.
     */
    const finishVoucher = (
      accepted: Accepted,
      channel: NonNullable<Accepted["channel"]>,
      ended: Ended
    ): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
      if (channels === undefined || ended._tag === "Failed") {
        return Effect.as(
          abandon(accepted),
          ended._tag === "Failed" ? HttpServerResponse.setHeaders(ErrorResponse.render(ended.error), { [headers.credit]: "unsettled" }) : ended.response
        )
      }
      const { deposit, reserved } = channel
      return Effect.map(channels.commit(reserved.channelId, BigInt(ended.charge ?? 0)), (after) =>
        HttpServerResponse.setHeaders(ended.response, {
          [X402.headers.paymentResponse]: X402.encodePaymentResponse({
            success: true,
            transaction: deposit?.transaction ?? "",
            network: accepted.payment.requirements.network,
            payer: accepted.principal.address,
            amount: deposit === undefined ? "" : deposit.amount.toString(),
            extra: BatchSettlement.responseExtra(reserved, after)
          })
        }))
    }

    /**
     * An `exact` payment's answer: the call's, or its error's, saying the payment stayed as credit
     * (`headers.credit`), kept for the `payment-identifier` when it is whole (not a stream).
     */
    const finishExact = (accepted: Accepted, ended: Ended): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
      const response = ended._tag === "Served"
        ? ended.response
        : HttpServerResponse.setHeaders(ErrorResponse.render(ended.error), { ...accepted.headers, [headers.credit]: "kept" })
      const { claim } = accepted
      if (claim === undefined || response.body._tag !== "Uint8Array") return Effect.succeed(response)
      return Effect.as(idempotency.complete(claim.scope, claim.key, StoredResponse.toStored(response)), response)
    }

    /**
     * An `upto` permit's answer: the captured charge settled on chain, the fraction of a base unit
     * rounded up credited to the wallet; a call that captured nothing settles nothing. The permit's
     * claim is released then: once settled, Permit2 refuses its nonce.
     */
    const finishUpto = (accepted: Accepted, ended: Ended): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
      const { payment, principal } = accepted
      const settled = (charge: Money.Nano) =>
        facilitator.settleActual(payment, charge).pipe(
          Effect.tap((settled) =>
            settled.amount > charge
              ? ledger.topUp({ accountId: principal.accountId, amount: Money.subtract(settled.amount, charge), reference: settled.reference }).pipe(
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
          Effect.tapError((error) => Effect.logError("x402 upto call served but its charge not settled", principal.address, charge, error.message))
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

    return PerCallPayment.of({
      carries: (requestHeaders) => enabled && Option.isSome(X402.paymentHeader(requestHeaders)),
      pricesAnonymous: (requestHeaders) =>
        enabled && requestHeaders["transfer-encoding"] === undefined &&
        Number(requestHeaders["content-length"] ?? 0) <= PRICED_BODY_MAX_BYTES,
      accept,
      finish: (accepted, ended) =>
        accepted.channel !== undefined
          ? finishVoucher(accepted, accepted.channel, ended)
          : accepted.fundsHold
          ? finishUpto(accepted, ended)
          : finishExact(accepted, ended),
      abandon
    })
  })
)
