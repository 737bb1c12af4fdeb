/**
 * The RPC proxy's network list: the 25 slugs of the spec, each with the chain family whose method
 * table applies (see `RpcAllowlist`) and its base credits per call. The list is authoritative: a slug
 * that is not here is an unsupported network.
 *
 * @since 0.1.0
 */

/**
 * Chain families that share one method table. Every EVM flavour has the EVM core methods; the
 * flavour adds its own namespace (arbtrace_*, bor_*, zks_*, linea_*, optimism_*).
 *
 * @category models
 */
export type RpcFamily =
  | "ethereum"
  | "arbitrum"
  | "optimism"
  | "polygon"
  | "linea"
  | "avalanche"
  | "bsc"
  | "zksync"
  | "solana"
  | "starknet"

/** @category models */
export interface Network {
  readonly slug: string
  readonly family: RpcFamily
  /** Credits of one Standard-tier call (the spec: 20, or 30 for zkSync Era and Solana). */
  readonly baseCredits: number
  /** EVM chain id, when the network is an EVM chain. */
  readonly chainId?: number
}

const evm = (slug: string, family: RpcFamily, chainId: number): Network => ({
  slug,
  family,
  baseCredits: family === "zksync" ? 30 : 20,
  chainId
})

/**
 * Every supported network, sorted by slug.
 *
 * @category constants
 */
export const networks: ReadonlyArray<Network> = [
  evm("arbitrum-mainnet", "arbitrum", 42161),
  evm("arbitrum-sepolia", "arbitrum", 421614),
  evm("avalanche-fuji", "avalanche", 43113),
  evm("avalanche-mainnet", "avalanche", 43114),
  evm("base-mainnet", "optimism", 8453),
  evm("base-sepolia", "optimism", 84532),
  evm("bsc-mainnet", "bsc", 56),
  evm("bsc-testnet", "bsc", 97),
  evm("ethereum-holesky", "ethereum", 17000),
  evm("ethereum-mainnet", "ethereum", 1),
  evm("ethereum-sepolia", "ethereum", 11155111),
  evm("linea-mainnet", "linea", 59144),
  evm("linea-sepolia", "linea", 59141),
  evm("optimism-mainnet", "optimism", 10),
  evm("optimism-sepolia", "optimism", 11155420),
  evm("polygon-amoy", "polygon", 80002),
  evm("polygon-mainnet", "polygon", 137),
  evm("robinhood-mainnet", "arbitrum", 4663),
  evm("robinhood-testnet", "arbitrum", 46630),
  { slug: "solana-devnet", family: "solana", baseCredits: 30 },
  { slug: "solana-mainnet", family: "solana", baseCredits: 30 },
  { slug: "starknet-mainnet", family: "starknet", baseCredits: 20 },
  { slug: "starknet-sepolia", family: "starknet", baseCredits: 20 },
  evm("zksync-mainnet", "zksync", 324),
  evm("zksync-sepolia", "zksync", 300)
]

const bySlug = new Map(networks.map((network) => [network.slug, network]))

/**
 * The network of a slug, or `undefined` for an unsupported one.
 *
 * @category lookups
 */
export const findNetwork = (slug: string): Network | undefined => bySlug.get(slug)

/**
 * The slugs, alphabetically sorted: the body of `GET /crypto/rpc/networks`.
 *
 * @category constants
 */
export const slugs: ReadonlyArray<string> = networks.map((network) => network.slug).sort()
