/**
 * The state of x402 `batch-settlement` payment channels, by channel id, shared by every worker and
 * instance. Two calls racing on one channel never both pass `reserve`, and a call served and then
 * lost with its process is still claimable.
 *
 * **When to use**
 *
 * A paid call goes through two steps of the store. `reserve` runs before the call is served: in one
 * atomic step it checks the voucher against the channel (its cumulative amount is exactly `charged`
 * plus the call's price, within the deposit and the exposure cap, no withdrawal started, no other
 * call in flight on the channel) and stores the voucher. `commit` adds the call's charge once it is
 * known; `release` lets a call that was not served go, and the client may send the same voucher
 * again. The second of two racing calls is refused as busy, as the scheme allows.
 *
 * **Details**
 *
 * A channel's state is its immutable config, its on-chain figures as last read (`balance`,
 * `totalClaimed`, whether the payer started a timed withdrawal), what tollgate has charged on it so
 * far (`charged`, the scheme's `chargedCumulativeAmount`) and the latest voucher the payer signed
 * (its cumulative `signedMax` and signature), which is what a claim sends on chain. The rule exists
 * twice, here for memory and in `PaymentChannelsRedis`'s Lua; both pass
 * `packages/redis/test/PaymentChannels.contract.test.ts`.
 *
 * Amounts are USDC base units, except what the calls cost, which is kept in nano-USD as well
 * (`chargedNano`): a call may cost a fraction of a base unit (an RPC call, 12.5 units), and the
 * cumulative charge in units is that total rounded up, so a thousand such calls charge exactly
 * 12,500 units, each call 12 or 13. The Redis twin computes in Lua numbers, exact below 2^53 (9
 * million USD in nano-USD), far above any channel's deposit.
 *
 * @since 0.1.0
 */
import { Context, Data, Effect, Layer, Option } from "effect"
import type * as Errors from "./Errors.ts"
import * as Money from "./Money.ts"

/**
 * The scheme's `ChannelConfig`, as the payer's payload carries it; its EIP-712 hash is the
 * channel id.
 *
 * @category models
 */
export interface ChannelConfig {
  readonly payer: string
  readonly payerAuthorizer: string
  readonly receiver: string
  readonly receiverAuthorizer: string
  readonly token: string
  readonly withdrawDelay: number
  readonly salt: string
}

/**
 * One channel as the store holds it.
 *
 * @category models
 */
export interface Channel {
  readonly channelId: string
  readonly config: ChannelConfig
  /** On chain, as last read: the escrow, and what has been claimed from it. */
  readonly balance: bigint
  readonly totalClaimed: bigint
  /** When the payer started a timed withdrawal (seconds), 0 when none: no call is served then. */
  readonly withdrawRequestedAt: number
  /**
   * What the calls served on this channel cost, cumulated, in base units (`chargedNano` rounded
   * up): what a claim may take.
   */
  readonly charged: bigint
  readonly chargedNano: bigint
  /** The latest voucher: its signed cumulative ceiling (at least `charged`) and its signature. */
  readonly signedMax: bigint
  readonly signature: string
  /** When a call was last served or reserved (ms), for refunds of idle channels. */
  readonly lastRequestAt: number
}

/**
 * Why a voucher was not reserved, as the scheme names it (`invalid_batch_settlement_evm_*`), or
 * tollgate's own reason for the two rules the scheme leaves to the server.
 *
 * @category models
 */
export type Refusal =
  | "invalid_batch_settlement_evm_missing_channel"
  | "invalid_batch_settlement_evm_channel_busy"
  | "invalid_batch_settlement_evm_cumulative_amount_mismatch"
  | "invalid_batch_settlement_evm_cumulative_exceeds_balance"
  | "batch_settlement_withdrawal_pending"
  | "batch_settlement_exposure_cap"

/**
 * The reasons in the order `reserve` checks them: one refusal names the first rule broken.
 *
 * @category constants
 */
export const REFUSALS: ReadonlyArray<Refusal> = [
  "invalid_batch_settlement_evm_missing_channel",
  "batch_settlement_withdrawal_pending",
  "invalid_batch_settlement_evm_channel_busy",
  "invalid_batch_settlement_evm_cumulative_amount_mismatch",
  "invalid_batch_settlement_evm_cumulative_exceeds_balance",
  "batch_settlement_exposure_cap"
]

/** @category errors */
export class VoucherRefused extends Data.TaggedError("VoucherRefused")<{
  readonly reason: Refusal
  /** The channel as the store holds it, for the corrective 402 (absent for a missing channel). */
  readonly channel: Channel | undefined
}> {}

/**
 * What `reserve` checks a voucher with.
 *
 * @category models
 */
export interface Reservation {
  readonly channelId: string
  /** The voucher's cumulative ceiling and its signature, verified by the caller. */
  readonly maxClaimable: bigint
  readonly signature: string
  /** The call's price (its worst case): the voucher must be exactly `charged + price`. */
  readonly price: bigint
  /** At most this much may be served on the channel and not yet claimed on chain. */
  readonly exposureCap: bigint
  /** The current time (ms); a reservation older than `leaseMs` no longer holds the channel. */
  readonly now: number
  readonly leaseMs: number
}

/**
 * The on-chain figures of a channel, as the chain or the facilitator reports them.
 *
 * @category models
 */
export interface OnChain {
  readonly balance: bigint
  readonly totalClaimed: bigint
  readonly withdrawRequestedAt: number
}

/** @category services */
export class PaymentChannels extends Context.Service<PaymentChannels, {
  /**
   * Records a channel, or refreshes its on-chain figures. A new channel starts charged at what is
   * claimed on chain (the scheme's baseline after lost state); an existing one keeps its charges.
   */
  readonly open: (
    channelId: string,
    config: ChannelConfig,
    onChain: OnChain,
    now: number
  ) => Effect.Effect<Channel, Errors.ServiceUnavailable>
  readonly get: (channelId: string) => Effect.Effect<Option.Option<Channel>, Errors.ServiceUnavailable>
  /** Checks and stores a voucher for one call, holding the channel until `commit` or `release`. */
  readonly reserve: (reservation: Reservation) => Effect.Effect<Channel, VoucherRefused | Errors.ServiceUnavailable>
  /**
   * The reserved call was served and cost `chargeNano` (at most its price): the cumulative charge
   * grows by it, and the channel is free again.
   */
  readonly commit: (channelId: string, chargeNano: bigint) => Effect.Effect<Channel, Errors.ServiceUnavailable>
  /** The reserved call was not served: nothing is charged, the voucher stays, the channel is free. */
  readonly release: (channelId: string) => Effect.Effect<void, Errors.ServiceUnavailable>
  /** Mirrors what is now claimed on chain (after a claim) and the escrow. */
  readonly mirror: (channelId: string, onChain: OnChain) => Effect.Effect<void, Errors.ServiceUnavailable>
  /** Every channel: the claim batches and the idle refunds read them. */
  readonly list: Effect.Effect<ReadonlyArray<Channel>, Errors.ServiceUnavailable>
  /** Forgets a channel refunded in full. */
  readonly remove: (channelId: string) => Effect.Effect<void, Errors.ServiceUnavailable>
  /**
   * Takes the claim round for `ttlMs` if no one holds it: of the instances sharing the store, one
   * sends the claims (they share the relayer key, whose nonces they would race for).
   */
  readonly lockRound: (owner: string, now: number, ttlMs: number) => Effect.Effect<boolean, Errors.ServiceUnavailable>
}>()("@tollgate/core/PaymentChannels") {}

/**
 * The rule of `reserve`: the first refusal for `channel`, or none. The Redis twin is the Lua of
 * `PaymentChannelsRedis.reserveScript`, which checks the same rules in the same order.
 *
 * @category rules
 */
export const refusal = (
  channel: Channel | undefined,
  pendingSince: number | undefined,
  reservation: Reservation
): Refusal | undefined => {
  if (channel === undefined) return "invalid_batch_settlement_evm_missing_channel"
  if (channel.withdrawRequestedAt !== 0) return "batch_settlement_withdrawal_pending"
  if (pendingSince !== undefined && reservation.now - pendingSince < reservation.leaseMs) return "invalid_batch_settlement_evm_channel_busy"
  if (reservation.maxClaimable !== channel.charged + reservation.price) return "invalid_batch_settlement_evm_cumulative_amount_mismatch"
  if (reservation.maxClaimable > channel.balance) return "invalid_batch_settlement_evm_cumulative_exceeds_balance"
  if (reservation.maxClaimable - channel.totalClaimed > reservation.exposureCap) return "batch_settlement_exposure_cap"
  return undefined
}

interface Entry {
  channel: Channel
  pendingSince: number | undefined
}

/**
 * The store in one process's memory.
 *
 * @category constructors
 */
export const makeMemory = (): PaymentChannels["Service"] => {
  const entries = new Map<string, Entry>()
  let round: { owner: string; until: number } | undefined
  const update = (channelId: string, change: (channel: Channel) => Channel) => {
    const entry = entries.get(channelId)
    if (entry !== undefined) entry.channel = change(entry.channel)
    return entry?.channel
  }
  return {
    open: (channelId, config, onChain, now) =>
      Effect.sync(() => {
        const existing = entries.get(channelId)
        if (existing !== undefined) {
          existing.channel = mirrored(existing.channel, onChain)
          return existing.channel
        }
        const channel: Channel = {
          channelId,
          config,
          ...onChain,
          charged: onChain.totalClaimed,
          chargedNano: onChain.totalClaimed * NANO_PER_UNIT,
          signedMax: onChain.totalClaimed,
          signature: "",
          lastRequestAt: now
        }
        entries.set(channelId, { channel, pendingSince: undefined })
        return channel
      }),
    get: (channelId) => Effect.sync(() => Option.fromNullishOr(entries.get(channelId)?.channel)),
    reserve: (reservation) =>
      Effect.suspend(() => {
        const entry = entries.get(reservation.channelId)
        const reason = refusal(entry?.channel, entry?.pendingSince, reservation)
        if (reason !== undefined || entry === undefined) {
          return Effect.fail(
            new VoucherRefused({ reason: reason ?? "invalid_batch_settlement_evm_missing_channel", channel: entry?.channel })
          )
        }
        entry.pendingSince = reservation.now
        entry.channel = {
          ...entry.channel,
          signedMax: reservation.maxClaimable,
          signature: reservation.signature,
          lastRequestAt: reservation.now
        }
        return Effect.succeed(entry.channel)
      }),
    commit: (channelId, chargeNano) =>
      Effect.suspend(() => {
        const entry = entries.get(channelId)
        if (entry === undefined) return Effect.die(new Error(`PaymentChannels.commit: no channel ${channelId}`))
        entry.pendingSince = undefined
        const chargedNano = entry.channel.chargedNano + chargeNano
        entry.channel = { ...entry.channel, chargedNano, charged: maxOf(entry.channel.charged, unitsOf(chargedNano)) }
        return Effect.succeed(entry.channel)
      }),
    release: (channelId) =>
      Effect.sync(() => {
        const entry = entries.get(channelId)
        if (entry !== undefined) entry.pendingSince = undefined
      }),
    mirror: (channelId, onChain) => Effect.sync(() => void update(channelId, (channel) => mirrored(channel, onChain))),
    list: Effect.sync(() => [...entries.values()].map((entry) => entry.channel)),
    remove: (channelId) => Effect.sync(() => void entries.delete(channelId)),
    lockRound: (owner, now, ttlMs) =>
      Effect.sync(() => {
        if (round !== undefined && round.owner !== owner && round.until > now) return false
        round = { owner, until: now + ttlMs }
        return true
      })
  }
}

const maxOf = (a: bigint, b: bigint) => (a > b ? a : b)

const NANO_PER_UNIT = BigInt(Money.NANO_PER_USDC_UNIT)

/**
 * A cumulative charge in base units: its nano-USD rounded up.
 *
 * @category rules
 */
export const unitsOf = (chargedNano: bigint): bigint => (chargedNano + NANO_PER_UNIT - 1n) / NANO_PER_UNIT

/** New on-chain figures: what is claimed on chain counts as charged, whatever this store had lost. */
const mirrored = (channel: Channel, onChain: OnChain): Channel => ({
  ...channel,
  ...onChain,
  charged: maxOf(channel.charged, onChain.totalClaimed),
  chargedNano: maxOf(channel.chargedNano, onChain.totalClaimed * NANO_PER_UNIT)
})

/**
 * The in-memory layer, for one process.
 *
 * @category layers
 */
export const layerMemory: Layer.Layer<PaymentChannels> = Layer.sync(PaymentChannels, makeMemory)
