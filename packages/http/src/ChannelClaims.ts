/**
 * The claims of `batch-settlement` payment channels: the background rounds that turn the vouchers
 * tollgate served calls on into USDC at `payTo`. Each round, the instance that holds the round's
 * lock (`PaymentChannels.lockRound`; instances share the relayer key):
 *
 * - watches the withdrawals payers start: one log query for the contract's `WithdrawInitiated`
 *   events in the blocks since the last round (`ChannelChain.withdrawalsAfter`, for every channel
 *   at once), and reads from the chain into the store the escrow and pending withdrawal of each of
 *   this store's channels named there, so a channel whose payer started a timed withdrawal takes
 *   no more vouchers at once, and of each channel with a withdrawal already seen. Where no scan
 *   covers the blocks before (an instance's first round, or a gap longer than
 *   `ChannelChain.WITHDRAWAL_SCAN_BLOCKS`), every channel with calls not yet claimed is read
 *   instead, once. A channel is not otherwise read while it serves: the events replace reading each
 *   channel with unclaimed calls every round;
 * - claims, in one transaction, the latest voucher of every channel with unclaimed charges, when
 *   the claim interval has passed since the last claim, when a channel's unclaimed charge reaches
 *   the threshold, or at once when a channel's withdrawal is pending (its vouchers reserve nothing
 *   on chain until claimed); then settles what was claimed to `payTo` in one transfer;
 * - refunds, cooperatively, the unclaimed escrow of a channel idle for `idleRefundMs` once all its
 *   charges are claimed (read from the chain first), and forgets it.
 *
 * **Details**
 *
 * Each claim and refund is counted (`tollgate_channel_claims_total`,
 * `tollgate_channel_claimed_usdc_units_total`, `tollgate_channel_refunds_total`) and logged with
 * its transaction; a withdrawal seen is logged with how it was seen. A failed round is logged and
 * the next one tries again.
 *
 * @since 0.1.0
 */
import { ChannelChain } from "@tollgate/backends/ChannelChain"
import { PaymentChannels } from "@tollgate/core"
import { Effect, Layer, Metric, Option, Schedule } from "effect"
import * as Observability from "./Observability.ts"

/** @category options */
export interface Options {
  /** Where claimed USDC is settled, and the token. */
  readonly payTo: string
  readonly token: string
  /** A claim is sent at least this often while charges are unclaimed. */
  readonly claimIntervalMs: number
  /** A channel whose unclaimed charge reaches this many base units is claimed at the next round. */
  readonly claimThreshold: bigint
  /** A channel idle this long, with everything claimed, is refunded and forgotten. */
  readonly idleRefundMs: number
  /** How often a round runs (and the blocks since the last one are scanned for withdrawals); default 1 second. */
  readonly roundMs?: number
}

/** @category constants */
export const DEFAULT_ROUND_MS = 1_000

/**
 * What one round did, for tests and logs.
 *
 * @category models
 */
export interface Round {
  readonly claimed: ReadonlyArray<string>
  readonly claimTransaction: string | undefined
  readonly settled: bigint
  readonly refunded: ReadonlyArray<string>
}

/**
 * The rounds over the store and the chain.
 *
 * @category constructors
 */
export const make = (options: Options) =>
  Effect.gen(function*() {
    const channels = yield* PaymentChannels.PaymentChannels
    const chain = yield* ChannelChain
    const owner = crypto.randomUUID()
    const roundMs = options.roundMs ?? DEFAULT_ROUND_MS
    let lastClaimAt = Date.now()
    // The last block scanned for withdrawals by this instance; moved only once what was found is
    // in the store, so a failed round scans the same blocks again.
    let scanned: bigint | undefined

    const round: Effect.Effect<Round, unknown> = Effect.gen(function*() {
      const now = Date.now()
      if (!(yield* channels.lockRound(owner, now, roundMs * 10)))
        return { claimed: [], claimTransaction: undefined, settled: 0n, refunded: [] }
      // The chain first: a withdrawal started since the last round stops the channel's calls now.
      const withdrawals = yield* chain.withdrawalsAfter(scanned)
      const started = new Set(withdrawals.channelIds.map((channelId) => channelId.toLowerCase()))
      const sweep = scanned === undefined || withdrawals.gap
      for (const channel of yield* channels.list) {
        if (
          started.has(channel.channelId.toLowerCase()) || channel.withdrawRequestedAt !== 0 ||
          (sweep && channel.charged > channel.totalClaimed)
        ) {
          const onChain = yield* chain.read(channel.channelId)
          yield* channels.mirror(channel.channelId, onChain)
          if (channel.withdrawRequestedAt === 0 && onChain.withdrawRequestedAt !== 0) {
            yield* Effect.logInfo("x402 batch-settlement withdrawal started", {
              channelId: channel.channelId,
              seenBy: started.has(channel.channelId.toLowerCase()) ? "event" : "sweep",
              unclaimedUnits: (channel.charged - channel.totalClaimed).toString()
            })
          }
        }
      }
      scanned = withdrawals.head
      const known = yield* channels.list
      const unclaimed = known.filter((channel) => channel.charged > channel.totalClaimed && channel.signature !== "")
      const due = unclaimed.length > 0 && (
        now - lastClaimAt >= options.claimIntervalMs ||
        unclaimed.some((channel) => channel.charged - channel.totalClaimed >= options.claimThreshold || channel.withdrawRequestedAt !== 0)
      )
      let claimTransaction: string | undefined
      let settled = 0n
      if (due) {
        const rowOf = (channel: PaymentChannels.Channel) => ({
          config: channel.config,
          signedMax: channel.signedMax,
          signature: channel.signature,
          totalClaimed: channel.charged
        })
        // One row that cannot be claimed (its escrow withdrawn meanwhile) reverts the whole batch:
        // then each channel is claimed alone, and those that still fail are logged and counted.
        claimTransaction = yield* chain.claim(unclaimed.map(rowOf)).pipe(
          Effect.catch(() =>
            Effect.forEach(unclaimed, (channel) =>
              chain.claim([rowOf(channel)]).pipe(
                Effect.catch((error) =>
                  Observability.count(Observability.channelClaims, { outcome: "failed" }).pipe(
                    Effect.andThen(
                      Effect.logError("x402 batch-settlement claim failed", {
                        channelId: channel.channelId,
                        charged: channel.charged.toString(),
                        error: error.message
                      })
                    ),
                    Effect.as("")
                  )
                )
              )).pipe(Effect.map((hashes) => hashes.filter((hash) => hash !== "").join(",")))
          )
        )
        lastClaimAt = now
        const units = unclaimed.reduce((sum, channel) => sum + channel.charged - channel.totalClaimed, 0n)
        yield* Observability.count(Observability.channelClaims, { outcome: "claimed" })
        yield* Metric.update(Observability.channelClaimedUnits, Number(units))
        for (const channel of unclaimed) {
          yield* channels.mirror(channel.channelId, yield* chain.read(channel.channelId))
        }
        const settlement = yield* chain.settle(options.payTo, options.token)
        settled = settlement.amount
        yield* Effect.logInfo("x402 batch-settlement claim", {
          channels: unclaimed.length,
          claimedUnits: units.toString(),
          claimTransaction,
          settledUnits: settlement.amount.toString(),
          settleTransaction: settlement.transaction
        })
      }
      const refunded: Array<string> = []
      const refundable = (channel: PaymentChannels.Channel) =>
        now - channel.lastRequestAt >= options.idleRefundMs &&
        channel.charged === channel.totalClaimed &&
        channel.withdrawRequestedAt === 0 &&
        channel.balance > channel.totalClaimed
      for (const stored of yield* channels.list) {
        if (!refundable(stored)) continue
        // The escrow as the chain holds it now: it was last read when the channel had calls to claim.
        yield* channels.mirror(stored.channelId, yield* chain.read(stored.channelId))
        const channel = Option.getOrUndefined(yield* channels.get(stored.channelId))
        if (channel === undefined || !refundable(channel)) continue
        const transaction = yield* chain.refund(channel.config, channel.balance - channel.totalClaimed)
        yield* channels.remove(channel.channelId)
        refunded.push(channel.channelId)
        yield* Metric.update(Observability.channelRefunds, 1)
        yield* Effect.logInfo("x402 batch-settlement refund", {
          channelId: channel.channelId,
          refundedUnits: (channel.balance - channel.totalClaimed).toString(),
          transaction
        })
      }
      return { claimed: due ? unclaimed.map((channel) => channel.channelId) : [], claimTransaction, settled, refunded }
    })
    return {
      round,
      run: Effect.repeat(
        round.pipe(Effect.catchCause((cause) =>
          Effect.as(Effect.logWarning("x402 batch-settlement round failed", cause), {
            claimed: [],
            claimTransaction: undefined,
            settled: 0n,
            refunded: []
          })
        )),
        Schedule.spaced(roundMs)
      )
    }
  })

/**
 * Runs the rounds in the background for as long as the layer lives.
 *
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<never, never, PaymentChannels.PaymentChannels | ChannelChain> =>
  Layer.effectDiscard(Effect.flatMap(make(options), (claims) => Effect.forkScoped(claims.run)))
