/**
 * Signatures of contract wallets (EIP-1271, and EIP-6492 for a wallet not deployed yet), checked on
 * chain by viem's universal validator. `Auth` takes the verifier this builds for SIWX, so core
 * never builds a chain client of its own: a server without an EVM RPC URL accepts only the
 * signatures of keys (EIP-191), which need no chain.
 *
 * @since 0.1.0
 */
import type { Siwx } from "@tollgate/core"
import { createPublicClient, http } from "viem"

/**
 * A verifier asking the chain behind `rpcUrl`.
 *
 * @category constructors
 */
export const verifier = (rpcUrl: string): Siwx.EvmVerifier => {
  const client = createPublicClient({ transport: http(rpcUrl) })
  return (args) => client.verifyMessage(args)
}
