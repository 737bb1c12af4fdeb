/**
 * The x402 `batch-settlement` scheme on EVM as tollgate takes it, for calls priced below the
 * per-call floor: the payer deposits USDC once into a channel of x402's channel contract, then
 * signs one voucher per call, each for the cumulative amount the channel has been charged plus the
 * call's price. Tollgate serves on a voucher checked here, with no chain round trip, and claims the
 * vouchers on chain in batches later (`PaymentChannels` keeps what each channel was charged).
 *
 * **When to use**
 *
 * This module holds the scheme's pure parts: the entry a 402 offers (`requirement`), the payload a
 * client sends (a `voucher`, or a `deposit` that opens or tops up the channel with a voucher), and
 * the offline check of that payload against the entry. What the store checks atomically (the
 * cumulative amount, the deposit, the exposure cap) is `PaymentChannels.reserve`'s.
 *
 * **Details**
 *
 * The check: the channel's config matches what was offered (token, receiver, receiver authorizer,
 * withdrawal delay, and that delay at least the configured minimum), it hashes to the channel id,
 * and the voucher's EIP-712 signature recovers to the payer's voucher signer. The refusals are the
 * scheme's error codes, and tollgate's own for the one rule the scheme leaves to the server.
 *
 * The signer is recovered by libsecp256k1 (the `secp256k1` package, whose native build ships for
 * Linux x64, macOS arm64 and Windows x64), not viem's `recoverAddress` (`@noble/curves` in
 * JavaScript): one recovery was most of a voucher's CPU, and the native one takes 0.07 ms against
 * 0.3 ms for libsecp256k1 in WebAssembly and 2.4 ms for viem's (`bench/voucher.ts`,
 * docs/benchmarks.md).
 *
 * @since 0.1.0
 */
import { keccak_256 } from "@noble/hashes/sha3.js"
import { BATCH_SETTLEMENT_ADDRESS, BATCH_SETTLEMENT_DOMAIN, BATCH_SETTLEMENT_SCHEME } from "@x402/evm"
import { computeChannelId } from "@x402/evm/batch-settlement/client"
import { Data, Option, Result, Schema } from "effect"
import Secp256k1 from "secp256k1"
import { bytesToHex, domainSeparator, getAddress, type Hex as HexString, hexToBytes, zeroAddress } from "viem"
import type * as PaymentChannels from "./PaymentChannels.ts"

/** @category constants */
export const SCHEME = BATCH_SETTLEMENT_SCHEME

/**
 * The contract's shortest withdrawal delay (`MIN_WITHDRAW_DELAY`, 15 minutes), which the SDK does
 * not export: a server may ask for more, never less.
 *
 * @category constants
 */
export const CONTRACT_MIN_WITHDRAW_DELAY_SECONDS = 900

/**
 * What a server that settles `batch-settlement` offers: the receiver authorizer its channels name
 * (the relayer, which sends the claims), the withdrawal delay it asks of new channels, the
 * shortest it accepts, the most it serves on one channel before those calls are claimed on chain,
 * and the deposit it announces (`extra.minDeposit`, which the official client deposits).
 *
 * @category models
 */
export interface Offer {
  readonly receiverAuthorizer: string
  readonly withdrawDelaySeconds: number
  readonly minimumWithdrawDelaySeconds: number
  /** USDC base units. */
  readonly exposureCap: bigint
  /** USDC base units. */
  readonly minDeposit: bigint
}

/**
 * The `extra` of a `batch-settlement` entry, as the scheme's server writes it: the channel
 * parameters the payer must use, the token's EIP-712 domain, the announced deposit.
 *
 * @category constructors
 */
export const extra = (offer: Offer, eip712: { readonly name: string; readonly version: string }) => ({
  receiverAuthorizer: offer.receiverAuthorizer,
  withdrawDelay: offer.withdrawDelaySeconds,
  name: eip712.name,
  version: eip712.version,
  minDeposit: offer.minDeposit.toString()
})

const Hex = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]*$/))
const Address = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{40}$/)) as unknown as Schema.Codec<`0x${string}`, string>
const Units = Schema.String.check(Schema.isPattern(/^\d{1,30}$/))

/** @category schemas */
export const ChannelConfig = Schema.Struct({
  payer: Address,
  payerAuthorizer: Address,
  receiver: Address,
  receiverAuthorizer: Address,
  token: Address,
  withdrawDelay: Schema.Int,
  salt: Hex
})

/** @category schemas */
export const Voucher = Schema.Struct({ channelId: Hex, maxClaimableAmount: Units, signature: Hex })

/**
 * What a client sends for a `batch-settlement` entry: a voucher on a funded channel, or a deposit
 * (the ERC-3009 authorization the facilitator submits) with the voucher of the call it pays.
 *
 * @category schemas
 */
export const Payload = Schema.Union([
  Schema.Struct({ type: Schema.Literal("voucher"), channelConfig: ChannelConfig, voucher: Voucher }),
  Schema.Struct({
    type: Schema.Literal("deposit"),
    channelConfig: ChannelConfig,
    voucher: Voucher,
    deposit: Schema.Struct({ amount: Units, authorization: Schema.Record(Schema.String, Schema.Unknown) })
  })
])

/** @category models */
export type Payload = typeof Payload.Type

/**
 * A payload that passed the offline check.
 *
 * @category models
 */
export interface Checked {
  readonly type: Payload["type"]
  readonly channelId: string
  readonly config: PaymentChannels.ChannelConfig
  readonly maxClaimable: bigint
  readonly signature: string
  readonly payer: string
  /** A deposit's amount, in base units. */
  readonly deposit: bigint | undefined
}

/**
 * Why a payload was refused: the scheme's code, or tollgate's own.
 *
 * @category errors
 */
export class PayloadRefused extends Data.TaggedError("PayloadRefused")<{
  readonly reason: string
  readonly message: string
}> {}

const refuse = (reason: string, message: string) => new PayloadRefused({ reason, message })

/**
 * The refusal of a channel whose withdrawal delay is shorter than the server accepts: the payer
 * could start a withdrawal and take the escrow before the served calls are claimed.
 *
 * @category constants
 */
export const WITHDRAW_DELAY_TOO_SHORT = "batch_settlement_withdraw_delay_too_short"

/**
 * The EIP-712 domain of vouchers on `chainId`: the channel contract's at its canonical address.
 *
 * @category constructors
 */
export const domain = (chainId: number) => ({ ...BATCH_SETTLEMENT_DOMAIN, chainId, verifyingContract: BATCH_SETTLEMENT_ADDRESS })

const chainIdOf = (network: string) => Number(network.slice("eip155:".length))

const VOUCHER_TYPEHASH = keccak_256(new TextEncoder().encode("Voucher(bytes32 channelId,uint128 maxClaimableAmount)"))
/** `0x1901` and the domain separator of vouchers, by chain id. */
const prefixes = new Map<number, Uint8Array>()

const digestOf = (chainId: number, channelId: string, maxClaimable: bigint): Uint8Array => {
  let prefix = prefixes.get(chainId)
  if (prefix === undefined) {
    prefix = new Uint8Array(34)
    prefix.set([0x19, 0x01])
    prefix.set(hexToBytes(domainSeparator({ domain: domain(chainId) })), 2)
    prefixes.set(chainId, prefix)
  }
  const struct = Buffer.alloc(96)
  struct.set(VOUCHER_TYPEHASH)
  struct.write(channelId.slice(2), 32, 32, "hex")
  struct.writeBigUInt64BE(maxClaimable >> 64n, 80)
  struct.writeBigUInt64BE(maxClaimable & 0xffffffffffffffffn, 88)
  const message = new Uint8Array(66)
  message.set(prefix)
  message.set(keccak_256(struct), 34)
  return keccak_256(message)
}

/**
 * The EIP-712 digest a voucher signs, the contract's `getVoucherDigest`. Written out rather than
 * through viem's `hashTypedData`, which validates and encodes the types on every call: the domain
 * separator is computed once per chain and the struct is three words, hashed as bytes (measured
 * in `bench/voucher.ts`, where the typed-data path was most of a voucher's CPU).
 *
 * @category verification
 */
export const voucherDigest = (chainId: number, channelId: string, maxClaimable: bigint): HexString =>
  bytesToHex(digestOf(chainId, channelId, maxClaimable))

/**
 * Half the order of secp256k1: the contract recovers vouchers with OpenZeppelin's `ECDSA`, which
 * refuses a signature whose `s` is above it. Such a voucher could never be claimed, and one in a
 * claim batch would revert the whole batch.
 */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n

/**
 * The address whose key signed `digest`, where `signature` is one the contract's `ecrecover` takes:
 * 65 bytes, `r` and `s` in range with `s` in the lower half, and `v` 27 or 28 (the precompile
 * recovers nothing from the 0 or 1 some signers write). Any other signature recovers no address.
 */
const signerOf = (digest: Uint8Array, signature: string): string | undefined => {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return undefined
  const bytes = Buffer.from(signature.slice(2), "hex")
  const v = bytes[64]!
  if ((v !== 27 && v !== 28) || BigInt(`0x${signature.slice(66, 130)}`) > HALF_ORDER) return undefined
  try {
    const hash = keccak_256(Secp256k1.ecdsaRecover(bytes.subarray(0, 64), v - 27, digest, false).subarray(1))
    return `0x${Buffer.from(hash.buffer, hash.byteOffset + 12, 20).toString("hex")}`
  } catch {
    // r or s zero or past the curve's order, or r not the x of a point: no key signed this.
    return undefined
  }
}

/** A channel as its vouchers name it: its id, its config as stored, and its voucher signer. */
interface Named {
  readonly channelId: string
  readonly config: PaymentChannels.ChannelConfig
  /** The key that signs its vouchers, lower-cased. */
  readonly signer: string
}

/**
 * Channels by network and config: a channel's vouchers all carry the same config, so its id (a
 * hash) and its checksummed addresses (a hash each) are computed once, not per voucher.
 */
const named = new Map<string, Named>()
const NAMED_KEPT = 10_000

const nameOf = (config: typeof ChannelConfig.Type, network: string): Named => {
  const key =
    `${network}|${config.payer}|${config.payerAuthorizer}|${config.receiver}|${config.receiverAuthorizer}|${config.token}|${config.withdrawDelay}|${config.salt}`
  let found = named.get(key)
  if (found === undefined) {
    if (named.size >= NAMED_KEPT) named.clear()
    found = {
      channelId: computeChannelId(config as Parameters<typeof computeChannelId>[0], network),
      config: { ...config, payer: getAddress(config.payer), receiver: getAddress(config.receiver) },
      signer: (sameAddress(config.payerAuthorizer, zeroAddress) ? config.payer : config.payerAuthorizer).toLowerCase()
    }
    named.set(key, found)
  }
  return found
}

/** Two addresses, both of the `0x` and 40 hex digits form, are one: compared without checksum. */
const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

const decodePayload = Schema.decodeUnknownOption(Payload)

/**
 * Checks a payload against the entry it paid, offline: the channel's config is the one offered,
 * its hash is the channel id, and the voucher is signed by the payer's voucher signer (the
 * `payerAuthorizer` key, or the payer's own key when none is named; a contract wallet must name a
 * voucher key, as the official client does by default, since its signature needs the chain).
 *
 * A plain function returning a `Result`: it never waits, and it is on every voucher-paid call.
 *
 * @category verification
 */
export const check = (
  requirement: {
    readonly network: string
    readonly asset: string
    readonly payTo: string
    readonly extra?: Readonly<Record<string, unknown>> | undefined
  },
  minimumWithdrawDelaySeconds: number,
  payload: unknown
): Result.Result<Checked, PayloadRefused> => {
  const decoded = decodePayload(payload)
  if (Option.isNone(decoded)) {
    return Result.fail(refuse("invalid_batch_settlement_evm_voucher_payload", "The payload is not a batch-settlement voucher or deposit"))
  }
  const { channelConfig: config, voucher } = decoded.value
  // The config's addresses passed `Address`; the requirement's are this server's own.
  if (!sameAddress(config.token, requirement.asset)) {
    return Result.fail(refuse("invalid_batch_settlement_evm_token_mismatch", "The channel's token is not the one offered"))
  }
  if (!sameAddress(config.receiver, requirement.payTo)) {
    return Result.fail(refuse("invalid_batch_settlement_evm_receiver_mismatch", "The channel's receiver is not payTo"))
  }
  if (!sameAddress(config.receiverAuthorizer, String(requirement.extra?.["receiverAuthorizer"]))) {
    return Result.fail(
      refuse("invalid_batch_settlement_evm_receiver_authorizer_mismatch", "The channel's receiver authorizer is not the one offered")
    )
  }
  if (config.withdrawDelay < minimumWithdrawDelaySeconds) {
    return Result.fail(
      refuse(WITHDRAW_DELAY_TOO_SHORT, `The channel's withdrawal delay is under ${minimumWithdrawDelaySeconds} s, too short to claim in`)
    )
  }
  if (config.withdrawDelay !== requirement.extra?.["withdrawDelay"]) {
    return Result.fail(
      refuse("invalid_batch_settlement_evm_withdraw_delay_mismatch", "The channel's withdrawal delay is not the one offered")
    )
  }
  const channel = nameOf(config, requirement.network)
  if (channel.channelId.toLowerCase() !== voucher.channelId.toLowerCase()) {
    return Result.fail(
      refuse("invalid_batch_settlement_evm_channel_id_mismatch", "The channel config does not hash to the voucher's channel id")
    )
  }
  const maxClaimable = BigInt(voucher.maxClaimableAmount)
  const recovered = signerOf(digestOf(chainIdOf(requirement.network), channel.channelId, maxClaimable), voucher.signature)
  if (recovered !== channel.signer) {
    return Result.fail(refuse(
      "invalid_batch_settlement_evm_voucher_signature",
      "The voucher is not signed by the channel's voucher signer in the form the contract accepts (65 bytes, low s, v 27 or 28)"
    ))
  }
  return Result.succeed({
    type: decoded.value.type,
    channelId: channel.channelId,
    config: channel.config,
    maxClaimable,
    signature: voucher.signature,
    payer: channel.config.payer,
    deposit: decoded.value.type === "deposit" ? BigInt(decoded.value.deposit.amount) : undefined
  })
}

/**
 * How long a call's reservation of its channel holds when its process never ends it (it died
 * mid-call): the channel is busy that long, then takes vouchers again.
 *
 * @category constants
 */
export const RESERVATION_LEASE_MS = 5 * 60_000

/**
 * The `extra` of a paid call's `PAYMENT-RESPONSE`, as the official client reads it: what the call
 * was charged (base units, the channel's cumulative charge before and after) and the channel as
 * the server holds it.
 *
 * @category constructors
 */
export const responseExtra = (before: PaymentChannels.Channel, after: PaymentChannels.Channel) => ({
  chargedAmount: (after.charged - before.charged).toString(),
  channelState: {
    channelId: after.channelId,
    balance: after.balance.toString(),
    totalClaimed: after.totalClaimed.toString(),
    withdrawRequestedAt: after.withdrawRequestedAt,
    refundNonce: "0",
    chargedCumulativeAmount: after.charged.toString()
  }
})

/**
 * The corrective 402's additions to the `batch-settlement` entry, for a voucher refused as not
 * the channel's charge plus the price (`invalid_batch_settlement_evm_cumulative_amount_mismatch`):
 * the channel as the store holds it, and its last voucher, whose signature the client checks
 * against its own key before it takes the channel's charge and signs again. A channel with no
 * voucher yet (its state read from the chain) has only its state.
 *
 * @category constructors
 */
export const correction = (
  channel: PaymentChannels.Channel
): { readonly scheme: string; readonly extra: Readonly<Record<string, unknown>> } => ({
  scheme: SCHEME,
  extra: {
    channelState: responseExtra(channel, channel).channelState,
    ...(channel.signature === ""
      ? {}
      : { voucherState: { signedMaxClaimable: channel.signedMax.toString(), signature: channel.signature } })
  }
})
