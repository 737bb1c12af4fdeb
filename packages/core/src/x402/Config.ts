/**
 * Where wallets pay and how the 402 bodies describe the service: the networks and tokens offered
 * (Base and Solana mainnet USDC by default), the receivers, the minimum top-up and the cheapest
 * call paid on its own, as a `Config` and the `X402Config` service; and the wallet addresses a
 * path may name.
 *
 * @since 0.1.0
 */
import bs58 from "bs58"
import { Context, Layer, Option } from "effect"
import { getAddress, isAddress } from "viem"
import type * as BatchSettlement from "../BatchSettlement.ts"
import * as Money from "../Money.ts"
import type { ChainFamily } from "../Principal.ts"

/** @category constants */
export const BASE_MAINNET = "eip155:8453"
/** @category constants */
export const SOLANA_MAINNET = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"
/** USDC on Base mainnet, EIP-712 domain `USD Coin` / `2`. @category constants */
export const BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
/** @category constants */
export const SOLANA_USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"

/**
 * The EVM option: an EIP-3009 token (USDC) on one chain. `eip712` is the token's EIP-712 domain,
 * which the client needs to sign.
 *
 * @category models
 */
export interface EvmOption {
  /** CAIP-2, `eip155:<chainId>`. */
  readonly network: string
  readonly asset: string
  readonly payTo: string
  readonly eip712: { readonly name: string; readonly version: string }
  /**
   * Present when a facilitator here settles the `upto` scheme (a Permit2 permit for at most the
   * quote, settled at the actual charge): the `extra` its entries carry, the Permit2 transfer
   * method and the facilitator address the payer's permit names (`@x402/evm/upto/server`).
   */
  readonly upto?: { readonly extra: Readonly<Record<string, unknown>> } | undefined
  /**
   * Present when a facilitator here settles `batch-settlement` (deposits, claims): calls below
   * `minimumPerCall` are offered a voucher on a payment channel, on these terms.
   */
  readonly batchSettlement?: BatchSettlement.Offer | undefined
}

/**
 * The Solana option: an SPL mint. `feePayer` is the facilitator's fee-paying address, taken from
 * its `/supported` answer.
 *
 * @category models
 */
export interface SolanaOption {
  readonly network: string
  readonly asset: string
  readonly payTo: string
  readonly feePayer: string
}

/**
 * Where wallets pay and how the 402 bodies describe the service.
 *
 * @category models
 */
export interface Config {
  /** The origin clients address, e.g. `https://api.example.com`: SIWX binds to it. */
  readonly publicOrigin: string
  /** Absent when no EVM receiver is configured (a production server without `x402.payTo`). */
  readonly evm?: EvmOption
  /** Absent when no Solana facilitator is configured; the top-up then offers Base only. */
  readonly solana?: SolanaOption
  readonly minimumTopUp: Money.Nano
  /**
   * The cheapest call a 402 offers to be paid on its own: a call priced lower is not worth its
   * settlement's gas, so its 402 offers only the top-up (then SIWX).
   */
  readonly minimumPerCall: Money.Nano
  readonly maxTimeoutSeconds: number
  /** Where an API key is obtained; defaults to `<publicOrigin>/api-keys`. */
  readonly getKeyUrl?: string
  /** Wallet documentation; defaults to `<publicOrigin>/docs/wallets`. */
  readonly docsUrl?: string
}

/**
 * The default `minimumPerCall`, 0.001 USD: a Base settlement costs the relayer a few hundredths of
 * a cent of gas, so calls below a tenth of a cent (RPC) are paid from credit only.
 *
 * @category constants
 */
export const DEFAULT_MINIMUM_PER_CALL: Money.Nano = Money.unsafeNano(Money.NANO_PER_USD / 1000)

/**
 * Base and Solana mainnet USDC with a 5 USD minimum and the official server's 300 s timeout.
 *
 * @category constructors
 */
export const makeConfig = (options: {
  readonly publicOrigin: string
  /**
   * Absent: wallet payments are off (no `accepts`, the top-up answers 503). A network whose
   * receiver is absent is not offered (a server with nothing to settle Base payments leaves `evm` out).
   */
  readonly payTo?: { readonly evm?: string | undefined; readonly solana?: string | undefined } | undefined
  /** From the facilitator's `/supported` (see `PaymentFacilitator.feePayerOf`). */
  readonly solanaFeePayer?: string | undefined
  readonly evm?: Partial<EvmOption>
  readonly solana?: Partial<Omit<SolanaOption, "payTo" | "feePayer">>
  readonly minimumTopUp?: Money.Nano
  readonly minimumPerCall?: Money.Nano
  readonly maxTimeoutSeconds?: number
  readonly getKeyUrl?: string
  readonly docsUrl?: string
}): Config => ({
  publicOrigin: options.publicOrigin.replace(/\/+$/, ""),
  ...(options.payTo?.evm === undefined ? {} : {
    evm: {
      network: BASE_MAINNET,
      asset: BASE_USDC,
      eip712: { name: "USD Coin", version: "2" },
      ...options.evm,
      payTo: options.payTo.evm
    }
  }),
  ...(options.payTo?.solana !== undefined && options.solanaFeePayer !== undefined
    ? {
      solana: {
        network: SOLANA_MAINNET,
        asset: SOLANA_USDC,
        ...options.solana,
        payTo: options.payTo.solana,
        feePayer: options.solanaFeePayer
      }
    }
    : {}),
  minimumTopUp: options.minimumTopUp ?? Money.usd(5),
  minimumPerCall: options.minimumPerCall ?? DEFAULT_MINIMUM_PER_CALL,
  maxTimeoutSeconds: options.maxTimeoutSeconds ?? 300,
  ...(options.getKeyUrl !== undefined ? { getKeyUrl: options.getKeyUrl } : {}),
  ...(options.docsUrl !== undefined ? { docsUrl: options.docsUrl } : {})
})

/**
 * Whether wallets can pay this server at all: some receiver is configured.
 *
 * @category predicates
 */
export const paymentsEnabled = (config: Config): boolean => config.evm !== undefined || config.solana !== undefined

/**
 * The x402 configuration as a service, for the pipeline and the top-up routes.
 *
 * @category services
 */
export class X402Config extends Context.Service<X402Config, Config>()("@tollgate/core/X402Config") {}

/** @category layers */
export const layer = (config: Config): Layer.Layer<X402Config> => Layer.succeed(X402Config, config)

/** @category paths */
export const topUpPath = "/api/v1/x402/top-up"

/** @category accessors */
export const topUpUrl = (config: Config): string => `${config.publicOrigin}${topUpPath}`

/**
 * A wallet address as a path parameter: EVM hex (a mixed-case address must carry a valid EIP-55
 * checksum) or a Solana base58 public key of 32 bytes. `None` when it is neither.
 *
 * @category constructors
 */
export const parseWalletAddress = (
  text: string
): Option.Option<{ readonly family: ChainFamily; readonly address: string }> => {
  if (text.startsWith("0x")) {
    return isAddress(text) ? Option.some({ family: "evm", address: getAddress(text) }) : Option.none()
  }
  if (!/^[1-9A-HJ-NP-Za-km-z]{32,44}$/.test(text)) return Option.none()
  try {
    return bs58.decode(text).length === 32 ? Option.some({ family: "solana", address: text }) : Option.none()
  } catch {
    return Option.none()
  }
}

/**
 * The chain family of a CAIP-2 network.
 *
 * @category accessors
 */
export const familyOf = (network: string): ChainFamily => (network.startsWith("solana:") ? "solana" : "evm")
