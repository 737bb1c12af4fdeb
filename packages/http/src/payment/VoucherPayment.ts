/**
 * The `batch-settlement` scheme paid per call: a voucher on a payment channel, reserved before the
 * call and committed with the call's charge after it; the channel is claimed on chain later, in
 * batches (`BatchSettlement`).
 *
 * **When to use**
 *
 * Through `PerCallPayment`, which routes a payment whose matched requirements name
 * `BatchSettlement.SCHEME` here; it is offered where the EVM option configures `batchSettlement`
 * (`X402.EvmOption`), and a server without `PaymentChannels` and `ChannelChain` refuses it as an
 * unsupported scheme.
 *
 * **Details**
 *
 * The voucher is checked offline (`BatchSettlement.check`), then reserved on its channel: stored,
 * and the channel held, before the call runs. A deposit with it is submitted first, and opens or
 * tops up the channel; a voucher on a channel this server has not seen yet (the store refuses it as
 * missing) reads the channel's escrow from the chain once, and is reserved again, so a voucher on a
 * known channel takes one step of the store. A call that fails charges nothing and frees the
 * channel, and the same voucher may be sent again.
 *
 * @since 0.1.0
 */
import { ChannelChain } from "@tollgate/backends/ChannelChain"
import type { Errors } from "@tollgate/core"
import { BatchSettlement, PaymentChannels, X402 } from "@tollgate/core"
import { Effect, Option, Result } from "effect"
import { HttpServerResponse } from "effect/http"
import * as ErrorResponse from "../ErrorResponse.ts"
import type { AcceptContext, Accepted, Ended, PaymentScheme } from "./PaymentScheme.ts"
import { headers, walletOf } from "./PaymentScheme.ts"

/**
 * The `batch-settlement` scheme over the configured channels and chain, where both are provided.
 *
 * @category constructors
 */
export const make: Effect.Effect<PaymentScheme, never, X402.X402Config> = Effect.gen(function*() {
  const config = yield* X402.X402Config
  // Present where `batch-settlement` is offered (`X402.EvmOption.batchSettlement`).
  const channels = Option.getOrUndefined(yield* Effect.serviceOption(PaymentChannels.PaymentChannels))
  const chain = Option.getOrUndefined(yield* Effect.serviceOption(ChannelChain))

  const accept = (
    payment: X402.MatchedPayment,
    { refuse }: AcceptContext
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
          ? Effect.fail(
            new X402.PaymentRejected({ reason: "invalid_batch_settlement_evm_channel_not_found", message: "The channel holds no deposit" })
          )
          : Effect.andThen(channels.open(voucher.channelId, voucher.config, onChain, now), reserve))
    const reserved: Effect.Effect<Accepted, Errors.ApiError | X402.PaymentRejected | PaymentChannels.VoucherRefused> =
      voucher.deposit !== undefined
        ? Effect.flatMap(
          chain.deposit(payment),
          (deposited) =>
            channels.open(voucher.channelId, voucher.config, deposited.onChain, now).pipe(
              Effect.andThen(reserve),
              Effect.map((channel) => accepted(channel, { transaction: deposited.transaction, amount: voucher.deposit! }))
            )
        )
        : reserve.pipe(
          Effect.catchTag(
            "VoucherRefused",
            (refused): Reserving => refused.reason !== "invalid_batch_settlement_evm_missing_channel" ? Effect.fail(refused) : missing()
          ),
          Effect.map((channel) => accepted(channel, undefined))
        )
    // A voucher that is not the channel's charge plus the price gets the corrective 402: the
    // client's state of the channel is stale (another client of the same key, a lost response).
    return Effect.catchTag(reserved, "VoucherRefused", (refused) =>
      Effect.fail(
        new X402.PaymentRejected({
          reason: refused.reason,
          message: `The voucher was refused (${refused.reason})`,
          correction: refused.reason === "invalid_batch_settlement_evm_cumulative_amount_mismatch" && refused.channel !== undefined
            ? BatchSettlement.correction(refused.channel)
            : undefined
        })
      ))
  }

  const abandon = ({ channel }: Accepted): Effect.Effect<void> =>
    channel !== undefined && channels !== undefined ? Effect.ignore(channels.release(channel.reserved.channelId)) : Effect.void

  /**
   * The call's charge added to its channel (the call was served, its voucher is stored already),
   * with the charge and the channel in `PAYMENT-RESPONSE`.
   */
  const finish = (accepted: Accepted, ended: Ended): Effect.Effect<HttpServerResponse.HttpServerResponse, Errors.ApiError> => {
    const { channel } = accepted
    if (channel === undefined || channels === undefined || ended._tag === "Failed") {
      return Effect.as(
        abandon(accepted),
        ended._tag === "Failed"
          ? HttpServerResponse.setHeaders(ErrorResponse.render(ended.error), { [headers.credit]: "unsettled" })
          : ended.response
      )
    }
    const { deposit, reserved } = channel
    return Effect.map(
      channels.commit(reserved.channelId, BigInt(ended.charge ?? 0)),
      (after) =>
        HttpServerResponse.setHeaders(ended.response, {
          [X402.headers.paymentResponse]: X402.encodePaymentResponse({
            success: true,
            transaction: deposit?.transaction ?? "",
            network: accepted.payment.requirements.network,
            payer: accepted.principal.address,
            amount: deposit === undefined ? "" : deposit.amount.toString(),
            extra: BatchSettlement.responseExtra(reserved, after)
          })
        })
    )
  }

  return { accept, finish, abandon }
})
