/**
 * Reading stakes from an EVM chain for `Staking`: the staked amount of a wallet is
 * `balanceOf(wallet)` of the configured contract, which is either the staking token itself (an
 * ERC-20 held by the wallet) or a staking contract exposing the same `balanceOf(address)` view,
 * as staked-token receipts (ERC-20 vault shares) do. `decimals()` is read once; a contract without
 * it counts in 18 decimals. Only whole tokens count: 2.9 staked tokens give a 2 USD allowance.
 * A read gives up after 3 s: it runs on a paid call's path, and the last known stake stands in.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"
import type { StakeReader } from "@tollgate/core/Staking"
import { Effect } from "effect"
import { type Address, createPublicClient, getAddress, http, isAddress } from "viem"

/** @category models */
export interface Options {
  /** CAIP-2 EVM network, e.g. `eip155:8453`. */
  readonly network: string
  /** The staking token (ERC-20) or staking contract address. */
  readonly contract: string
  readonly rpcUrl: string
}

const abi = [
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ type: "uint256" }]
  },
  { type: "function", name: "decimals", stateMutability: "view", inputs: [], outputs: [{ type: "uint8" }] }
] as const

/**
 * A `StakeReader` over JSON-RPC.
 *
 * @category constructors
 */
export const reader = (options: Options): StakeReader => {
  const chainId = /^eip155:(\d+)$/.exec(options.network)?.[1]
  if (chainId === undefined) throw new Error(`${options.network} is not an EVM network`)
  if (!isAddress(options.contract)) throw new Error(`${options.contract} is not an address`)
  const contract = getAddress(options.contract)
  const client = createPublicClient({ transport: http(options.rpcUrl, { timeout: 3_000 }) })
  let decimals: Promise<number> | undefined
  const scale = () => {
    decimals ??= client.readContract({ address: contract, abi, functionName: "decimals" }).then(Number, () => 18)
    return decimals
  }
  return (wallet) =>
    Effect.tryPromise({
      try: async () => {
        const [balance, places] = await Promise.all([
          client.readContract({ address: contract, abi, functionName: "balanceOf", args: [wallet as Address] }),
          scale()
        ])
        const tokens = balance / 10n ** BigInt(places)
        return tokens > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(tokens)
      },
      catch: () => new Errors.ServiceUnavailable({ message: `The staking contract on ${options.network} could not be read` })
    })
}
