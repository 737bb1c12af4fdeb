/**
 * A Solana test chain for x402: litesvm behind JSON-RPC (testkit `SolanaRpc`) with USDC at its
 * mainnet mint address (so the official client treats it as USDC), a funded fee payer whose
 * 64-byte key tollgate is configured with, and helpers for the payments the official client would
 * never produce (other mint, other receiver, other amount).
 */
import { createKeyPairSignerFromBytes, generateKeyPairSigner, type KeyPairSigner } from "@solana/kit"
import { X402 } from "@tollgate/core"
import { SolanaRpc } from "@tollgate/testkit"
import { ExactSvmScheme } from "@x402/svm/exact/client"

export type Chain = Awaited<ReturnType<typeof start>>

export const start = async () => {
  const rpc = await SolanaRpc.start()
  rpc.createMint(X402.SOLANA_USDC, 6)
  const feePayerKey = SolanaRpc.keyPairBytes()
  const feePayer = await createKeyPairSignerFromBytes(feePayerKey)
  rpc.airdrop(feePayer.address, 10_000_000_000n)
  return {
    rpc,
    feePayerKey,
    feePayer: feePayer.address as string,
    /** A wallet holding `units` of USDC, and one SOL it never needs (the fee payer pays). */
    wallet: async (units: bigint): Promise<KeyPairSigner> => {
      const signer = await generateKeyPairSigner()
      await rpc.fund(X402.SOLANA_USDC, signer.address, units)
      return signer
    },
    /** An empty USDC account for a receiver, as a treasury has. */
    receiver: async (): Promise<string> => {
      const signer = await generateKeyPairSigner()
      await rpc.fund(X402.SOLANA_USDC, signer.address, 0n)
      return signer.address
    },
    usdcOf: (owner: string) => rpc.tokenBalance(X402.SOLANA_USDC, owner),
    /** The official client scheme of `signer`, reading the chain through the local RPC. */
    scheme: (signer: KeyPairSigner) => new ExactSvmScheme(signer, { rpcUrl: rpc.url }),
    stop: () => rpc.stop()
  }
}
