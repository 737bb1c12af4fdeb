/**
 * Who is calling. An API-key principal is an account acting through one key; a wallet principal
 * is an address on a chain family that signed in with SIWX and maps to one wallet account. Every
 * metered operation is charged to `accountId`, and every limit is keyed by it.
 *
 * @since 0.1.0
 */
import { Data } from "effect"

/** @category models */
export type KeyType = "INFERENCE" | "ADMIN"

/** @category models */
export type Tier = "default" | "partner"

/** @category models */
export type ChainFamily = "evm" | "solana"

/** @category models */
export class ApiKeyPrincipal extends Data.TaggedClass("ApiKey")<{
  readonly accountId: string
  readonly keyId: string
  readonly keyType: KeyType
  readonly tier: Tier
}> {}

/** @category models */
export class WalletPrincipal extends Data.TaggedClass("Wallet")<{
  readonly accountId: string
  readonly address: string
  readonly family: ChainFamily
  /** CAIP-2 chain id, e.g. `eip155:8453` or `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp`. */
  readonly chainId: string
}> {}

/** @category models */
export type Principal = ApiKeyPrincipal | WalletPrincipal

/**
 * The account of a wallet: one per (chain family, address). EVM addresses are case-insensitive,
 * so they are lower-cased; Solana addresses are case-sensitive base58.
 *
 * @category constructors
 */
export const walletAccountId = (family: ChainFamily, address: string): string =>
  `wallet:${family}:${family === "evm" ? address.toLowerCase() : address}`

/**
 * Whether an account id is a wallet's (`walletAccountId`).
 *
 * @category guards
 */
export const isWalletAccountId = (accountId: string): boolean => accountId.startsWith("wallet:")

/**
 * The id logs and metrics may carry: the account and key id, never a secret.
 *
 * @category formatting
 */
export const describe = (principal: Principal): string =>
  principal._tag === "ApiKey" ? `${principal.accountId}/${principal.keyId}` : principal.accountId
